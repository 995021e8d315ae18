// GrpcStatusService: the StatusService of one paramd-server (status,
// checkpoint now, step timeline) over a Shard, on raw bytes
// (server/rpc/byte_methods.h) behind the job's token.
#ifndef PARAMD_SERVER_RPC_GRPC_STATUS_SERVICE_H_
#define PARAMD_SERVER_RPC_GRPC_STATUS_SERVICE_H_

#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>

#include "common/rpc/credentials.h"
#include "server/shard/shard.h"

namespace paramd {

class GrpcStatusService final : public grpc::Service {
 public:
  // As GrpcParameterService: the status RPC needs the token too.
  GrpcStatusService(Shard* shard, const JobSecurity* security);

  // Adds a method built outside the class (grpc::Service::AddMethod is
  // protected); the service owns it.
  void AddRawMethod(grpc::internal::RpcServiceMethod* method) {
    AddMethod(method);
  }

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

  Shard* const shard_;
  // gRPC keeps pointers to the method names.
  std::string name_;
  std::string checkpoint_name_;
  std::string trace_name_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_GRPC_STATUS_SERVICE_H_
