// ServedMethods: every method a paramd-server serves, by its full name
// ("/paramd.proto.ParameterService/Push"), and the AsyncCall that serves a
// call of it (server/rpc/async_calls.h). The services add their methods
// (GrpcParameterService, GrpcStatusService, GrpcReplicaService); the
// server's one completion queue asks Make for each call that comes. A
// method not here is answered UNIMPLEMENTED naming it.
//
// A unary method is served on raw bytes behind the job's token: the call
// reads its one request on the queue's thread, runs the handler on a
// thread of the queue's HandlerThreads (a handler may wait: a pull under
// sync) and sends its response with the status — after the testing
// section's reply faults, for a method added with them: a handled call's
// reply held back on the call's alarm (no thread waits), then lost or
// sent (server/faults/reply_faults.h).
//
// Filled before the server starts; read-only (and thread-safe) after.
#ifndef PARAMD_SERVER_RPC_SERVED_METHODS_H_
#define PARAMD_SERVER_RPC_SERVED_METHODS_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/base/cancellation.h"
#include "common/rpc/credentials.h"
#include "server/faults/reply_faults.h"
#include "server/rpc/async_calls.h"

namespace paramd {

class ServedMethods {
 public:
  using MakeCall = AsyncCallQueue::MakeCall;
  // Answers `request` into `response` (sent only with an OK status). The
  // context gives the call's deadline and metadata; `cancel` is cancelled
  // as soon as gRPC tells the queue's thread that the call was cancelled
  // or its deadline passed (a handler that waits stops waiting then).
  using UnaryHandler = std::function<grpc::Status(
      grpc::ServerContext* context, Cancellation* cancel,
      const grpc::ByteBuffer& request, grpc::ByteBuffer* response)>;

  // "/<service>/<rpc>".
  static std::string MethodName(absl::string_view service,
                                absl::string_view rpc);

  // A streaming method: `make` serves each of its calls (and checks the
  // token itself).
  void AddStream(std::string name, MakeCall make);
  // A unary method, `rpc` in messages; served once the call carries
  // `security`'s token (read only while serving; it outlives the server),
  // its OK replies subject to `faults` unless null (outlives the server).
  void AddUnary(std::string name, const char* rpc, const JobSecurity* security,
                UnaryHandler handler, const ReplyFaults* faults = nullptr);
  // AddUnary with a member of `service` (which outlives the server) as the
  // handler: how the services add theirs.
  template <typename Service>
  void AddUnaryMember(std::string name, const char* rpc,
                      const JobSecurity* security, Service* service,
                      grpc::Status (Service::*handler)(grpc::ServerContext*,
                                                       const grpc::ByteBuffer*,
                                                       grpc::ByteBuffer*),
                      const ReplyFaults* faults = nullptr) {
    AddUnary(
        std::move(name), rpc, security,
        [service, handler](grpc::ServerContext* context, Cancellation*,
                           const grpc::ByteBuffer& request,
                           grpc::ByteBuffer* response) {
          return (service->*handler)(context, &request, response);
        },
        faults);
  }
  // The same for a handler that may wait, told when its caller gave up.
  template <typename Service>
  void AddUnaryMember(std::string name, const char* rpc,
                      const JobSecurity* security, Service* service,
                      grpc::Status (Service::*handler)(grpc::ServerContext*,
                                                       Cancellation*,
                                                       const grpc::ByteBuffer*,
                                                       grpc::ByteBuffer*),
                      const ReplyFaults* faults = nullptr) {
    AddUnary(
        std::move(name), rpc, security,
        [service, handler](grpc::ServerContext* context, Cancellation* cancel,
                           const grpc::ByteBuffer& request,
                           grpc::ByteBuffer* response) {
          return (service->*handler)(context, cancel, &request, response);
        },
        faults);
  }

  // The call that serves the call in `slot` (an UNIMPLEMENTED one for a
  // method not added).
  AsyncCall* Make(AsyncCallQueue* queue, std::unique_ptr<CallSlot> slot) const;

  // Serves every method added here on gRPC's async API: registers
  // `generic` with `builder`, builds and starts `*server` and polls its one
  // completion queue with one thread (`*calls`), which Make serves from.
  // `port` is where the builder's AddListeningPort writes the port it
  // bound: without a server or with port 0, nothing is left running and
  // the error is "cannot listen on ADDRESS: the port is in use, or the
  // address is not local" followed by `more` (another cause, or empty).
  // The methods must outlive `*calls`.
  absl::Status Serve(grpc::ServerBuilder* builder,
                     grpc::AsyncGenericService* generic, const int* port,
                     const std::string& address, absl::string_view more,
                     std::unique_ptr<grpc::Server>* server,
                     std::unique_ptr<AsyncCallQueue>* calls) const;

 private:
  std::map<std::string, MakeCall, std::less<>> methods_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_SERVED_METHODS_H_
