#include "server/rpc/byte_methods.h"

namespace paramd {

absl::Status CheckSize(absl::string_view what, const grpc::ByteBuffer& bytes,
                       int64_t limit) {
  if (static_cast<int64_t>(bytes.Length()) <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ": message of ", bytes.Length(),
                   " bytes is over this shard's limit of ", limit, " bytes"));
}

}  // namespace paramd
