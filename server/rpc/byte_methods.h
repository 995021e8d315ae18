// Serving gRPC methods on raw bytes, as every service of a server does
// (server/rpc/served_methods.h): every message's size checked against a
// limit of the server's own, small requests parsed with a clear error.
#ifndef PARAMD_SERVER_RPC_BYTE_METHODS_H_
#define PARAMD_SERVER_RPC_BYTE_METHODS_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/rpc/grpc_frames.h"
#include "common/rpc/grpc_status.h"

namespace paramd {

// The largest request other than a push: a few ids and numbers.
constexpr int64_t kSmallMessageBytes = 1 << 20;

// RESOURCE_EXHAUSTED when `bytes` is over `limit`. gRPC's own size limit
// is off on the server (see ParameterServer::Start): the handlers check
// every message they read, so that a message over the limit always fails
// its call the same way, whatever arrived before it.
inline absl::Status CheckSize(absl::string_view what,
                              const grpc::ByteBuffer& bytes, int64_t limit) {
  if (static_cast<int64_t>(bytes.Length()) <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ": message of ", bytes.Length(),
                   " bytes is over this shard's limit of ", limit, " bytes"));
}

// Parses `bytes` as a `Request`, calls `call(request, &response)` and
// serializes the response. Bytes that do not parse are INVALID_ARGUMENT
// naming the RPC and the message (gRPC's own parser would answer INTERNAL
// with no message).
template <typename Request, typename Response, typename Call>
grpc::Status ServeMessage(const char* rpc, const grpc::ByteBuffer& bytes,
                          grpc::ByteBuffer* reply, Call call) {
  if (absl::Status s = CheckSize(rpc, bytes, kSmallMessageBytes); !s.ok()) {
    return ToGrpcStatus(s);
  }
  Request request;
  if (!ParseMessage(bytes, &request)) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat(rpc, ": malformed ", Request::descriptor()->name(), " (",
                     bytes.Length(), " bytes that do not parse)")));
  }
  Response response;
  if (absl::Status s = call(request, &response); !s.ok()) {
    return ToGrpcStatus(s);
  }
  *reply = SerializeMessage(response);
  return grpc::Status::OK;
}

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_BYTE_METHODS_H_
