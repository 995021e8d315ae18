#include "tools/serve/rpc/lookup_server.h"

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"
#include "proto/paramd.grpc.pb.h"

namespace paramd {

constexpr size_t kMaxLookupIds = 1 << 20;

class LookupServer::Service final : public proto::LookupService::Service {
 public:
  Service(ServedModel* model, JobSecurity security)
      : model_(model), security_(std::move(security)) {}

  grpc::Status Lookup(grpc::ServerContext* context,
                      const proto::LookupRequest* request,
                      proto::LookupResponse* response) override {
    if (grpc::Status s = CheckCallToken(security_, *context, "Lookup");
        !s.ok()) {
      return s;
    }
    const std::string& bytes = request->ids();
    if (bytes.size() % 8 != 0 || bytes.size() / 8 > kMaxLookupIds) {
      return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
          "Lookup: ids of ", bytes.size(),
          " bytes: a whole number of little-endian uint64s, at most ",
          kMaxLookupIds)));
    }
    std::vector<uint64_t> ids(bytes.size() / 8);
    std::memcpy(ids.data(), bytes.data(), bytes.size());
    std::vector<float> rows;
    absl::StatusOr<ServedModel::Read> read =
        model_->Lookup(request->table(), ids, &rows);
    if (!read.ok()) return ToGrpcStatus(read.status());
    response->set_sequence(read->sequence);
    for (uint64_t v : read->versions) response->add_versions(v);
    response->set_data(rows.data(), rows.size() * sizeof(float));
    return grpc::Status::OK;
  }

  grpc::Status GetTensor(grpc::ServerContext* context,
                         const proto::TensorRequest* request,
                         proto::TensorResponse* response) override {
    if (grpc::Status s = CheckCallToken(security_, *context, "GetTensor");
        !s.ok()) {
      return s;
    }
    std::vector<int64_t> shape;
    std::vector<float> values;
    absl::StatusOr<ServedModel::Read> read =
        model_->Tensor(request->name(), &shape, &values);
    if (!read.ok()) return ToGrpcStatus(read.status());
    response->set_sequence(read->sequence);
    for (int64_t d : shape) response->add_shape(d);
    response->set_data(values.data(), values.size() * sizeof(float));
    return grpc::Status::OK;
  }

 private:
  ServedModel* const model_;
  const JobSecurity security_;
};

absl::StatusOr<std::unique_ptr<LookupServer>> LookupServer::Start(
    ServedModel* model, const std::string& listen,
    const JobSecurity& security) {
  std::unique_ptr<LookupServer> server(new LookupServer());
  server->service_ = std::make_unique<Service>(model, security);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, MakeServerCredentials(security),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  builder.SetMaxSendMessageSize(-1);
  builder.SetMaxReceiveMessageSize(16 << 20);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("paramd-serve: cannot listen on ", listen));
  }
  return server;
}

LookupServer::~LookupServer() {
  if (server_ != nullptr) server_->Shutdown();
}

}  // namespace paramd
