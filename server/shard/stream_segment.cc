#include "server/shard/stream_segment.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace paramd {

absl::StatusOr<SharedSegment*> StreamSegment::Get(absl::string_view name) {
  if (segment_ != nullptr) {
    if (segment_->name() == name) return segment_.get();
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory segment '", name, "': this stream's is '",
                     segment_->name(), "'; a stream names one segment"));
  }
  ASSIGN_OR_RETURN(segment_, SharedSegment::Attach(name));
  return segment_.get();
}

}  // namespace paramd
