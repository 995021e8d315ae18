// DeclarationServer: shard K of a job whose file leaves the model to its
// workers (JobConfig::awaits_declaration), listening until one declares
// it. It serves DeclareModel alone, behind the job's TLS and token as the
// parameter server does; every other method of the job's services is
// answered UNAVAILABLE ("waits for its workers to declare the model"),
// which clients retry. The first valid declaration is taken (kept beside
// the checkpoints, KeepDeclaration) and answered, then `on_declared` runs;
// later ones are compared with it (CheckDeclaration). paramd-server then
// shuts this server down and serves the shard on the same port.
//
// Lifecycle: Start, then Shutdown from any thread. Thread-safe.
#ifndef PARAMD_SERVER_DECLARE_RPC_DECLARATION_SERVER_H_
#define PARAMD_SERVER_DECLARE_RPC_DECLARATION_SERVER_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/server.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/config/job_config.h"
#include "common/rpc/credentials.h"
#include "server/rpc/async_calls.h"
#include "server/rpc/served_methods.h"

namespace paramd {

class DeclarationServer {
 public:
  DeclarationServer(JobConfig job, int shard_id, std::string launch,
                    std::function<void()> on_declared);
  ~DeclarationServer();
  DeclarationServer(const DeclarationServer&) = delete;
  DeclarationServer& operator=(const DeclarationServer&) = delete;

  // Listens on `address` ("host:port"); returns the bound port.
  absl::StatusOr<int> Start(const std::string& address);
  void Shutdown();

  // The job with the declaration taken; nullopt until one is.
  std::optional<JobConfig> declared() const;

 private:
  grpc::Status DeclareModel(const grpc::ByteBuffer& request,
                            grpc::ByteBuffer* response);
  // Every unary-served method but DeclareModel: UNAVAILABLE.
  void AddWaitingMethods();

  const JobConfig job_;
  const int shard_id_;
  const std::string launch_;
  const std::function<void()> on_declared_;
  JobSecurity security_;  // Loaded by Start, before serving.

  mutable absl::Mutex mu_;
  std::optional<JobConfig> declared_ ABSL_GUARDED_BY(mu_);

  ServedMethods methods_;
  grpc::AsyncGenericService generic_;
  std::unique_ptr<AsyncCallQueue> calls_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_DECLARE_RPC_DECLARATION_SERVER_H_
