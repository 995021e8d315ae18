// ParameterServer: one shard served over gRPC on a listening socket.
//
// Lifecycle: Create, Start (binds; port 0 picks a free port, read back with
// port(); starts the thread that ticks the shard's leases), then Shutdown
// (wakes blocked pulls, stops accepting, waits for handlers) from any
// thread; Wait blocks until Shutdown completes.
#ifndef PARAMD_SERVER_RPC_PARAMETER_SERVER_H_
#define PARAMD_SERVER_RPC_PARAMETER_SERVER_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/server.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/replication/rpc/replica_rpc.h"
#include "server/rpc/async_calls.h"
#include "server/rpc/grpc_services.h"
#include "server/rpc/grpc_status_service.h"
#include "server/rpc/served_methods.h"
#include "server/shard/shard.h"

namespace paramd {

class ParameterServer {
 public:
  // `clock` and `options` as for Shard::Create.
  static absl::StatusOr<std::unique_ptr<ParameterServer>> Create(
      const JobConfig& config, int shard_id, Clock* clock = nullptr,
      const ShardOptions& options = ShardOptions());
  ~ParameterServer();

  // Listens on `address` ("host:port"), with TLS and the job token as the
  // job's security section says. Returns the bound port.
  absl::StatusOr<int> Start(const std::string& address);
  // replication.factor 2, after Start: this replica is reached at
  // `own_address`, the other one at `peer` (empty: not known yet, learnt
  // when it calls); asks the peer what it is and takes this process's
  // part (ShardReplica::Start). `on_replaced` runs once, on any thread,
  // when this process gives the shard up (ShardReplica::set_on_replaced).
  // With coordination.etcd the shard's fence is in etcd
  // (EtcdShardFence): an error naming coordination.etcd when it grants no
  // lease, or the claim cannot be asked.
  absl::Status StartReplica(const std::string& own_address,
                            const std::string& peer,
                            std::function<void()> on_replaced = nullptr);
  void Shutdown();
  void Wait();

  int port() const { return port_; }
  Shard* shard() { return shard_.get(); }

 private:
  explicit ParameterServer(std::unique_ptr<Shard> shard);

  std::unique_ptr<Shard> shard_;
  // Loaded by Start, before serving; read by the services' handlers.
  JobSecurity security_;
  ReplyFaults faults_;  // The job's testing section.
  GrpcParameterService parameter_service_;
  GrpcStatusService status_service_;
  std::unique_ptr<GrpcReplicaService> replica_service_;
  void TickLoop();

  // Every method of the three services, served through one generic
  // service on one completion queue and its thread (async_calls.h); before
  // server_, so that they outlive it.
  ServedMethods methods_;
  grpc::AsyncGenericService generic_;
  std::unique_ptr<AsyncCallQueue> calls_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  absl::Duration tick_every_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread ticker_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_PARAMETER_SERVER_H_
