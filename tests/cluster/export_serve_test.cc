// Export to serving end to end: an embedding_bag job trains on 2 servers
// over loopback gRPC; paramctl export's code reads the model from them
// into a folder; a LookupServer (paramd-serve's) over that folder answers
// a plain protobuf client with exactly the rows the servers hold at that
// version (rows never pushed at their initial values) and the dense
// tensors the workers ended on; an incremental export of an unchanged
// job carries no rows, and the serving model takes it. A job exported
// half-way and trained on: its incremental export holds exactly the rows
// whose values changed, and the served model then equals the servers.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <set>

#include "common/model/model_spec.h"
#include "common/model/rows.h"
#include "proto/paramd.grpc.pb.h"
#include "server/checkpoint/file_system.h"
#include "tests/cluster_training.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"
#include "tools/ctl/export_job.h"
#include "tools/serve/rpc/lookup_server.h"
#include "tools/serve/served_model.h"
#include "worker/rpc/grpc_parameter_client.h"
#include "worker/trainer.h"

namespace paramd {
namespace {

JobConfig EmbeddingJob() {
  testing::JobOptions o;
  o.epochs = 1;
  o.train_limit = 1024;
  o.test_limit = 256;
  testing::UsePixelsTable(&o, "{type: adagrad, learning_rate: 0.05}");
  return testing::MakeJob(o, testing::NewTempDir());
}

TEST_CASE("an exported model served over gRPC reads as the servers hold it",
          "[export][serve][integration]") {
  const JobConfig config = EmbeddingJob();
  testing::LocalCluster cluster(config);
  testing::Observed observed;
  const auto trainers = testing::TrainAll(config, cluster, observed);

  ExportOptions options;
  options.addresses = cluster.addresses();
  options.out = testing::NewTempDir() + "/exports";
  options.page_rows = 1000;  // Several pages a shard.
  absl::StatusOr<ExportSummary> whole =
      ExportJob(config, options, LocalFileSystem());
  INFO(whole.status().ToString());
  REQUIRE(whole.ok());
  CHECK(whole->sequence == 1);
  uint64_t held = 0;
  for (int s = 0; s < 2; ++s) {
    const ShardStore& store = cluster.server(s).shard()->store();
    held += store.table(0).rows();
    CHECK(whole->versions[s] == store.version());
  }
  CHECK(whole->rows == held);
  CHECK(held > 1000);

  auto model = ServedModel::Load(LocalFileSystem(), options.out);
  REQUIRE(model.ok());
  auto server = LookupServer::Start(model->get(), "127.0.0.1:0", {});
  REQUIRE(server.ok());
  auto stub = proto::LookupService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                          grpc::InsecureChannelCredentials()));

  // Every id below 20,000 (most pushed, some never): as the owning shard
  // reads it.
  std::vector<uint64_t> ids(20000);
  for (uint64_t id = 0; id < ids.size(); ++id) ids[id] = id;
  proto::LookupRequest request;
  request.set_table("pixels");
  request.set_ids(EncodeRowIds(ids));
  proto::LookupResponse response;
  {
    grpc::ClientContext context;
    grpc::Status s = stub->Lookup(&context, request, &response);
    INFO(s.error_message());
    REQUIRE(s.ok());
  }
  CHECK(response.sequence() == 1);
  REQUIRE(response.data().size() == ids.size() * 8 * sizeof(float));
  std::vector<float> served(ids.size() * 8);
  std::memcpy(served.data(), response.data().data(), response.data().size());
  int pushed = 0, fresh = 0;
  for (uint64_t id : ids) {
    const RowTable& table =
        cluster.server(RowShard(0, id, 2)).shard()->store().table(0);
    std::vector<float> want(8);
    const uint64_t one[] = {id};
    table.Read(one, want.data());
    INFO("id " << id);
    CHECK(std::vector<float>(served.begin() + id * 8,
                             served.begin() + (id + 1) * 8) == want);
    (table.Holds(id) ? pushed : fresh) += 1;
  }
  CHECK(pushed > 100);
  CHECK(fresh > 100);

  // The dense tensors: as the workers ended (sync: the same on both).
  const ModelSpec spec = BuildModelSpec(config.model);
  const FlatLayout layout(spec);
  for (size_t t = 0; t < spec.tensors.size(); ++t) {
    proto::TensorRequest tr;
    tr.set_name(spec.tensors[t].name);
    proto::TensorResponse tensor;
    grpc::ClientContext context;
    REQUIRE(stub->GetTensor(&context, tr, &tensor).ok());
    std::vector<float> values(spec.tensors[t].num_elements);
    REQUIRE(tensor.data().size() == values.size() * sizeof(float));
    std::memcpy(values.data(), tensor.data().data(), tensor.data().size());
    const std::vector<float>& params = trainers[0]->params();
    INFO(spec.tensors[t].name);
    CHECK(values == std::vector<float>(
                        params.begin() + layout.offset[t],
                        params.begin() + layout.offset[t] + values.size()));
  }

  // Nothing changed since: an incremental export with no rows, taken.
  options.incremental = true;
  absl::StatusOr<ExportSummary> none =
      ExportJob(config, options, LocalFileSystem());
  REQUIRE(none.ok());
  CHECK(none->sequence == 2);
  CHECK(none->base == 1);
  CHECK(none->rows == 0);
  CHECK(*(*model)->Refresh() == 1);
  {
    grpc::ClientContext context;
    REQUIRE(stub->Lookup(&context, request, &response).ok());
  }
  CHECK(response.sequence() == 2);
  CHECK(response.data() ==
        std::string(reinterpret_cast<const char*>(served.data()),
                    served.size() * sizeof(float)));
  // A bad table is refused naming it.
  request.set_table("items");
  grpc::ClientContext context;
  grpc::Status s = stub->Lookup(&context, request, &response);
  CHECK(s.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(s.error_message().find("no table 'items'") != std::string::npos);
}

// Trains every rank of `config` for `steps` steps from where the servers
// are (new trainers register and join there).
void TrainSteps(const JobConfig& config, testing::LocalCluster& cluster,
                int64_t steps) {
  std::vector<std::unique_ptr<Trainer>> trainers;
  for (int rank = 0; rank < config.num_workers; ++rank) {
    TrainerOptions options;
    options.max_steps = steps;
    auto trainer =
        Trainer::Create(config, rank, std::move(options),
                        GrpcParameterClientFactory(cluster.addresses()));
    REQUIRE(trainer.ok());
    trainers.push_back(*std::move(trainer));
  }
  testing::RunAll(trainers);
}

// Every row the servers hold, by id (each store's own listing).
std::map<uint64_t, std::vector<float>> ServerRows(
    testing::LocalCluster& cluster) {
  std::map<uint64_t, std::vector<float>> out;
  for (int s = 0; s < 2; ++s) {
    const ShardStore::Exported held =
        cluster.server(s).shard()->store().Export({});
    const RowTable::Exported& rows = held.tables[0];
    for (size_t i = 0; i < rows.ids.size(); ++i) {
      out[rows.ids[i]] = std::vector<float>(rows.values.begin() + i * 8,
                                            rows.values.begin() + (i + 1) * 8);
    }
  }
  return out;
}

TEST_CASE(
    "an incremental export holds exactly the rows changed since, and "
    "the served model follows the servers",
    "[export][serve][integration]") {
  JobConfig config = EmbeddingJob();
  testing::LocalCluster cluster(config);
  TrainSteps(config, cluster, 8);
  ExportOptions options;
  options.addresses = cluster.addresses();
  options.out = testing::NewTempDir() + "/exports";
  REQUIRE(ExportJob(config, options, LocalFileSystem()).ok());
  auto first = ReadModelExport(LocalFileSystem(),
                               options.out + "/export-000001.manifest");
  REQUIRE(first.ok());
  std::map<uint64_t, std::vector<float>> before;
  const ExportedTable& t1 = first->tables[0];
  for (size_t i = 0; i < t1.ids.size(); ++i) {
    before[t1.ids[i]] = std::vector<float>(t1.values.begin() + i * 8,
                                           t1.values.begin() + (i + 1) * 8);
  }
  CHECK(before == ServerRows(cluster));
  auto model = ServedModel::Load(LocalFileSystem(), options.out);
  REQUIRE(model.ok());

  TrainSteps(config, cluster, 4);  // Four more steps: some rows change.
  options.incremental = true;
  absl::StatusOr<ExportSummary> delta =
      ExportJob(config, options, LocalFileSystem());
  REQUIRE(delta.ok());
  CHECK(delta->base == 1);
  auto second = ReadModelExport(LocalFileSystem(), delta->manifest);
  REQUIRE(second.ok());
  const ExportedTable& t2 = second->tables[0];
  const std::map<uint64_t, std::vector<float>> now = ServerRows(cluster);
  std::set<uint64_t> changed;
  for (const auto& [id, row] : now) {
    auto it = before.find(id);
    if (it == before.end() || it->second != row) changed.insert(id);
  }
  CHECK(std::set<uint64_t>(t2.ids.begin(), t2.ids.end()) == changed);
  CHECK(!changed.empty());
  CHECK(changed.size() < now.size());
  for (size_t i = 0; i < t2.ids.size(); ++i) {
    CHECK(std::vector<float>(t2.values.begin() + i * 8,
                             t2.values.begin() + (i + 1) * 8) ==
          now.at(t2.ids[i]));
  }
  // The served model, refreshed, reads as the servers do.
  CHECK(*(*model)->Refresh() == 1);
  for (const auto& [id, row] : now) {
    std::vector<float> served;
    const uint64_t one[] = {id};
    REQUIRE((*model)->Lookup("pixels", one, &served).ok());
    CHECK(served == row);
  }
}

}  // namespace
}  // namespace paramd
