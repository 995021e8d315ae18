#include "server/declare/rpc/declaration_server.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/rpc/grpc_status.h"
#include "proto/paramd.pb.h"
#include "server/declare/model_declaration.h"
#include "server/rpc/byte_methods.h"
#include "spdlog/spdlog.h"

namespace paramd {

DeclarationServer::DeclarationServer(JobConfig job, int shard_id,
                                     std::string launch,
                                     std::function<void()> on_declared)
    : job_(std::move(job)),
      shard_id_(shard_id),
      launch_(std::move(launch)),
      on_declared_(std::move(on_declared)) {}

DeclarationServer::~DeclarationServer() { Shutdown(); }

void DeclarationServer::AddWaitingMethods() {
  const std::string waiting = absl::StrCat(
      "shard ", shard_id_,
      " waits for its workers to declare the model (DeclareModel): the job "
      "file lists ",
      job_.model.tensors_declared ? "no tensors" : "no optimizer section");
  // GetStatus answers, so that paramctl sees the shard alive and says why
  // it waits.
  const absl::Time started = absl::Now();
  methods_.AddUnary(
      ServedMethods::MethodName("paramd.proto.StatusService", "GetStatus"),
      "GetStatus", &security_,
      [this, waiting, started](grpc::ServerContext*, Cancellation*,
                               const grpc::ByteBuffer& request,
                               grpc::ByteBuffer* response) {
        return ServeMessage<proto::GetStatusRequest, proto::ShardStatus>(
            "GetStatus", request, response,
            [&](const proto::GetStatusRequest&, proto::ShardStatus* out) {
              out->set_job_id(job_.job_id);
              out->set_shard(shard_id_);
              out->set_num_shards(job_.num_shards());
              out->set_policy(PolicyName(job_.policy.type));
              out->set_uptime_seconds(
                  absl::ToDoubleSeconds(absl::Now() - started));
              out->set_awaiting_declaration(waiting);
              return absl::OkStatus();
            });
      });
  for (const char* service :
       {"paramd.proto.ParameterService", "paramd.proto.StatusService"}) {
    const google::protobuf::ServiceDescriptor* descriptor =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
            service);
    if (descriptor == nullptr) continue;
    for (int i = 0; i < descriptor->method_count(); ++i) {
      // The pool's names live as long as the process.
      const std::string& rpc = descriptor->method(i)->name();
      if (rpc == "DeclareModel" || rpc == "GetStatus") continue;
      // Streams too: answered once their first message is read.
      methods_.AddUnary(ServedMethods::MethodName(service, rpc), rpc.c_str(),
                        &security_,
                        [waiting](grpc::ServerContext*, Cancellation*,
                                  const grpc::ByteBuffer&, grpc::ByteBuffer*) {
                          return ToGrpcStatus(absl::UnavailableError(waiting));
                        });
    }
  }
}

absl::StatusOr<int> DeclarationServer::Start(const std::string& address) {
  ASSIGN_OR_RETURN(security_, LoadSecurity(job_.security));
  methods_.AddUnary(
      ServedMethods::MethodName("paramd.proto.ParameterService",
                                "DeclareModel"),
      "DeclareModel", &security_,
      [this](grpc::ServerContext*, Cancellation*,
             const grpc::ByteBuffer& request, grpc::ByteBuffer* response) {
        return DeclareModel(request, response);
      });
  AddWaitingMethods();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, MakeServerCredentials(security_), &port);
  // As the parameter server: a port in use is an error, not shared.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  RETURN_IF_ERROR(methods_.Serve(&builder, &generic_, &port, address, "",
                                 &server_, &calls_));
  return port;
}

grpc::Status DeclarationServer::DeclareModel(const grpc::ByteBuffer& request,
                                             grpc::ByteBuffer* response) {
  bool taken = false;
  grpc::Status status =
      ServeMessage<proto::DeclareModelRequest, proto::DeclareModelResponse>(
          "DeclareModel", request, response,
          [&](const proto::DeclareModelRequest& r,
              proto::DeclareModelResponse* out) -> absl::Status {
            absl::MutexLock lock(&mu_);
            ASSIGN_OR_RETURN(JobConfig declared,
                             CheckDeclaration(declared_ ? *declared_ : job_,
                                              shard_id_, launch_, r, out));
            if (declared_) return absl::OkStatus();
            RETURN_IF_ERROR(KeepDeclaration(declared, shard_id_));
            spdlog::info(
                "shard {}: took the model rank {} declared: {} tensor(s){}",
                shard_id_, r.rank(), declared.model.tensors.size(),
                declared.optimizer_declared
                    ? absl::StrCat(", optimizer ", declared.optimizer.type)
                    : "");
            declared_ = std::move(declared);
            taken = true;
            return absl::OkStatus();
          });
  if (taken && on_declared_) on_declared_();
  return status;
}

std::optional<JobConfig> DeclarationServer::declared() const {
  absl::MutexLock lock(&mu_);
  return declared_;
}

void DeclarationServer::Shutdown() {
  if (server_ == nullptr) return;
  // A declaration being answered gets its reply out first.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (calls_ != nullptr) calls_->Shutdown();
  server_->Wait();
  server_.reset();
}

}  // namespace paramd
