// LookupServer: paramd-serve's gRPC server — proto LookupService over a
// ServedModel, on gRPC's synchronous API, with the job's TLS and token when
// given (as the job's own servers).
#ifndef PARAMD_TOOLS_SERVE_RPC_LOOKUP_SERVER_H_
#define PARAMD_TOOLS_SERVE_RPC_LOOKUP_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/credentials.h"
#include "tools/serve/served_model.h"

namespace paramd {

class LookupServer {
 public:
  // Serves `model` (which outlives the server) on `listen` ("HOST:PORT";
  // port 0: one the system picks).
  static absl::StatusOr<std::unique_ptr<LookupServer>> Start(
      ServedModel* model, const std::string& listen,
      const JobSecurity& security);
  ~LookupServer();  // Shuts down: calls in flight finish first.

  int port() const { return port_; }

 private:
  class Service;
  LookupServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace paramd

#endif  // PARAMD_TOOLS_SERVE_RPC_LOOKUP_SERVER_H_
