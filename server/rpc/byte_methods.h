// Serving gRPC methods on raw bytes, as both of a server's services do
// (server/rpc/grpc_services.h, grpc_status_service.h): every message's
// size checked against a limit of the server's own, small requests parsed
// with a clear error, and unary methods registered behind the job's token.
// A raw-bytes method on gRPC's synchronous API can be declared only through
// grpc::internal (RpcServiceMethod, RpcMethodHandler): gRPC 1.51 generates
// raw methods for the async and callback APIs alone (docs/architecture.md,
// "Where gRPC's internal API is still used, and why").
#ifndef PARAMD_SERVER_RPC_BYTE_METHODS_H_
#define PARAMD_SERVER_RPC_BYTE_METHODS_H_

#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/method_handler.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/rpc/credentials.h"
#include "common/rpc/grpc_frames.h"
#include "common/rpc/grpc_status.h"

namespace paramd {

// The largest request other than a push: a few ids and numbers.
constexpr int64_t kSmallMessageBytes = 1 << 20;

// RESOURCE_EXHAUSTED when `bytes` is over `limit`. gRPC's own size limit
// is off on the server (see ParameterServer::Start): the handlers check
// every message they read, so that a message over the limit always fails
// its call the same way, whatever arrived before it.
absl::Status CheckSize(absl::string_view what, const grpc::ByteBuffer& bytes,
                       int64_t limit);

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

// Adds the unary method `name` (`rpc` in messages) to `service`, served
// by `handler` once the call carries the job's token.
template <typename Service>
void AddByteMethod(Service* service, const char* name, const char* rpc,
                   const JobSecurity* security,
                   grpc::Status (Service::*handler)(grpc::ServerContext*,
                                                    const grpc::ByteBuffer*,
                                                    grpc::ByteBuffer*)) {
  service->AddRawMethod(new grpc::internal::RpcServiceMethod(
      name, grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<Service, grpc::ByteBuffer,
                                           grpc::ByteBuffer>(
          [handler, rpc, security](Service* s, grpc::ServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) {
            grpc::Status auth = CheckCallToken(*security, *context, rpc);
            if (!auth.ok()) return auth;
            return (s->*handler)(context, request, response);
          },
          service)));
}

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_BYTE_METHODS_H_
