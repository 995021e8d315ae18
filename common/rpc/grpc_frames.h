// grpc::ByteBuffer <-> the segments and pieces of common/wire/wire_format.h.
//
// A FrameBuilder makes a ByteBuffer of small framing strings (copied) and
// large data referenced in place: each data slice holds a reference to an
// owner object, so the data lives until gRPC has sent it and released the
// last slice, however the call ends. A ReceivedFrame holds a received
// message's slices (no copy) and views of them. Small protobuf messages
// (requests and replies without tensor bytes) go through SerializeMessage
// and ParseMessage.
#ifndef PARAMD_COMMON_RPC_GRPC_FRAMES_H_
#define PARAMD_COMMON_RPC_GRPC_FRAMES_H_

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace paramd {

class FrameBuilder {
 public:
  // `owner` keeps every referenced byte alive.
  explicit FrameBuilder(std::shared_ptr<const void> owner)
      : owner_(std::move(owner)) {}

  void AddCopy(absl::string_view bytes) {
    pending_.append(bytes.data(), bytes.size());
  }
  // `data` must lie in memory `owner` keeps alive and unchanged until the
  // frame's slices are released. Fewer than kCopyBelow bytes are copied.
  static constexpr size_t kCopyBelow = 256;
  void AddReference(absl::string_view data);
  grpc::ByteBuffer Finish();

 private:
  void Flush();

  std::shared_ptr<const void> owner_;
  std::string pending_;
  std::vector<grpc::Slice> slices_;
};

class ReceivedFrame {
 public:
  // Takes `buffer`'s slices (by reference count, no copy).
  absl::Status Take(const grpc::ByteBuffer& buffer);
  absl::Span<const absl::string_view> segments() const { return views_; }

 private:
  std::vector<grpc::Slice> slices_;
  std::vector<absl::string_view> views_;
};

// `message` serialized into a one-slice buffer.
grpc::ByteBuffer SerializeMessage(const google::protobuf::MessageLite& message);
// Parses the whole of `buffer` into `message`; false when it does not parse.
bool ParseMessage(const grpc::ByteBuffer& buffer,
                  google::protobuf::MessageLite* message);

}  // namespace paramd

#endif  // PARAMD_COMMON_RPC_GRPC_FRAMES_H_
