// The gRPC sides of a shard's replication (replication.factor 2;
// server/replication/shard_replica.h): GrpcReplicaService serves the
// ReplicaService of proto/paramd.proto over a Shard's ShardReplica, and
// GrpcReplicaPeer calls the other replica's. Both on raw bytes behind the
// job's token, like the other services.
#ifndef PARAMD_SERVER_REPLICATION_RPC_REPLICA_RPC_H_
#define PARAMD_SERVER_REPLICATION_RPC_REPLICA_RPC_H_

#include <grpcpp/channel.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>

#include <memory>
#include <string>

#include "common/rpc/credentials.h"
#include "proto/paramd.grpc.pb.h"
#include "server/rpc/served_methods.h"
#include "server/shard/shard.h"

namespace paramd {

class GrpcReplicaService final {
 public:
  // `shard` has a replica (replication.factor 2); `security` as for the
  // other services.
  GrpcReplicaService(Shard* shard, const JobSecurity* security);

  // "/paramd.proto.ReplicaService/<rpc>".
  static std::string MethodName(const char* rpc);

  // Adds the service's methods to `methods`; this object outlives them.
  void AddTo(ServedMethods* methods);

 private:
  grpc::Status Replicate(grpc::ServerContext* context,
                         const grpc::ByteBuffer* request,
                         grpc::ByteBuffer* response);
  grpc::Status Handover(grpc::ServerContext* context,
                        const grpc::ByteBuffer* request,
                        grpc::ByteBuffer* response);

  Shard* const shard_;
  // A Replicate carries the shard's whole state: parameters, optimizer
  // slots and rows.
  const int64_t max_replicate_bytes_;
  const JobSecurity* const security_;
};

// The other replica, over a channel of its own. Each call returns by its
// timeout on this side's own wait: gRPC 1.51 does not end a call at its
// deadline while the connection's socket is full and unacknowledged — a
// peer whose host vanished without closing it (grpc/grpc#15889) — but
// only once the kernel gives the connection up, 15-20 minutes later. Such
// a call is cancelled and left to gRPC, holding its request; the channel
// pings the peer each `keepalive` while a call is open and closes a
// connection whose ping goes unanswered as long, which ends them.
class GrpcReplicaPeer final : public ReplicaPeer {
 public:
  GrpcReplicaPeer(const std::string& address, const JobSecurity& security,
                  absl::Duration keepalive);

  absl::Status Replicate(std::shared_ptr<const proto::ReplicateRequest> request,
                         absl::Duration timeout,
                         proto::ReplicateResponse* response) override;
  absl::Status Handover(const proto::HandoverRequest& request,
                        absl::Duration timeout,
                        proto::HandoverResponse* response) override;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::ReplicaService::Stub> stub_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_REPLICATION_RPC_REPLICA_RPC_H_
