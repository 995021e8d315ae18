// StreamSegment: the shared-memory segment (common/wire/shared_segment.h) a
// StepStream's pushes named, attached on first use and held for the
// stream's life: where that stream's pushes' chunk bytes lie and its
// replies' go. A stream names one segment only. Thread-compatible: one
// stream's reactor uses it.
#ifndef PARAMD_SERVER_SHARD_STREAM_SEGMENT_H_
#define PARAMD_SERVER_SHARD_STREAM_SEGMENT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/wire/shared_segment.h"

namespace paramd {

class StreamSegment {
 public:
  // The segment `name`, mapped the first time it is named;
  // FailedPrecondition ("shared memory segment ...") when it cannot be, or
  // when the stream named another before.
  absl::StatusOr<SharedSegment*> Get(absl::string_view name);
  // The segment, once a push named one; null before.
  SharedSegment* attached() const { return segment_.get(); }

 private:
  std::unique_ptr<SharedSegment> segment_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_STREAM_SEGMENT_H_
