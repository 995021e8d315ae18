// GrpcStatusService: the StatusService of one paramd-server (status,
// checkpoint now, step timeline) over a Shard, on raw bytes
// (server/rpc/byte_methods.h) behind the job's token.
#ifndef PARAMD_SERVER_RPC_GRPC_STATUS_SERVICE_H_
#define PARAMD_SERVER_RPC_GRPC_STATUS_SERVICE_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>

#include "common/rpc/credentials.h"
#include "server/rpc/served_methods.h"
#include "server/shard/shard.h"

namespace paramd {

class GrpcStatusService final {
 public:
  // As GrpcParameterService: the status RPC needs the token too.
  GrpcStatusService(Shard* shard, const JobSecurity* security);

  // Adds the service's methods to `methods`; this object outlives them.
  void AddTo(ServedMethods* methods);

 private:
  grpc::Status GetStatus(grpc::ServerContext* context,
                         const grpc::ByteBuffer* request,
                         grpc::ByteBuffer* response);
  grpc::Status Checkpoint(grpc::ServerContext* context,
                          const grpc::ByteBuffer* request,
                          grpc::ByteBuffer* response);
  grpc::Status Trace(grpc::ServerContext* context,
                     const grpc::ByteBuffer* request,
                     grpc::ByteBuffer* response);
  grpc::Status Export(grpc::ServerContext* context,
                      const grpc::ByteBuffer* request,
                      grpc::ByteBuffer* response);

  Shard* const shard_;
  const JobSecurity* const security_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_GRPC_STATUS_SERVICE_H_
