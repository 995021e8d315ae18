// Embedding tables end to end: 2 servers and 2 workers over loopback gRPC
// train an embedding_bag model on real Fashion-MNIST, pulling and pushing
// rows by id. Under sync both ranks end with the same parameters, every
// feature the data holds became exactly one row on the shard that owns
// it, and a plain protobuf client reads the same rows. An embedding_concat
// model trains on a click-log file (data.format: clicks) to near the loss
// of the teacher that drew its labels, its table holding exactly the
// field values the file has.
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/model/rows.h"
#include "proto/paramd.grpc.pb.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"
#include "tools/rows/click_log.h"
#include "worker/data/click_log_file.h"
#include "worker/data/dataset.h"
#include "worker/model/embedding_front.h"
#include "worker/model/image_features.h"
#include "worker/rpc/grpc_parameter_client.h"
#include "worker/trainer.h"

namespace paramd {
namespace {

JobConfig HashedJob(const std::string& policy) {
  testing::JobOptions o;
  o.policy = policy;
  o.epochs = 2;
  o.batch_size = 32;
  o.train_limit = 2048;
  o.test_limit = 512;
  testing::UsePixelsTable(&o, "{type: adam, learning_rate: 0.02}");
  JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  config.optimizer = OptimizerConfig();
  config.optimizer.type = "adam";
  config.optimizer.learning_rate = 0.01;
  config.optimizer.eps = 1e-8;
  return config;
}

struct Run {
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<std::vector<double>> losses;
};

Run TrainAll(const JobConfig& config, testing::LocalCluster& cluster) {
  Run run;
  run.losses.resize(config.num_workers);
  for (int rank = 0; rank < config.num_workers; ++rank) {
    TrainerOptions t;
    t.on_step = [&run, rank](uint64_t, double loss) {
      run.losses[rank].push_back(loss);
    };
    auto trainer =
        Trainer::Create(config, rank, std::move(t),
                        GrpcParameterClientFactory(cluster.addresses()));
    INFO(trainer.status().ToString());
    REQUIRE(trainer.ok());
    run.trainers.push_back(*std::move(trainer));
  }
  std::vector<absl::Status> results(run.trainers.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < run.trainers.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = run.trainers[r]->Run(); });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : results) {
    INFO(s.ToString());
    REQUIRE(s.ok());
  }
  return run;
}

double Mean(const std::vector<double>& v, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += v[i];
  return sum / (end - begin);
}

TEST_CASE("an embedding_bag job trains over gRPC with rows by id",
          "[integration][embedding]") {
  const JobConfig config = HashedJob("sync");
  testing::LocalCluster cluster(config);
  const Run run = TrainAll(config, cluster);
  // Lock-step: the same dense parameters on both ranks, and the loss fell.
  CHECK(run.trainers[0]->params() == run.trainers[1]->params());
  for (const auto& l : run.losses) {
    REQUIRE(l.size() == 64);
    CHECK(Mean(l, 48, 64) < 0.7 * Mean(l, 0, 16));
  }
  // Every feature of the training images is one row, on its owner.
  Dataset train =
      *LoadDataset(config.data.train_images, config.data.train_labels, 2048);
  ImageFeatures image_features = *ImageFeatures::Create(
      config.model.features, config.model.embeddings[0].rows, train.dim);
  std::vector<int64_t> all(train.size);
  for (int64_t i = 0; i < train.size; ++i) all[i] = i;
  std::vector<float> x(train.size * train.dim);
  std::vector<int32_t> y(train.size);
  train.Gather(all.data(), static_cast<int>(train.size), x.data(), y.data());
  std::vector<uint64_t> ids_of_all;
  image_features.Featurize(x.data(), static_cast<int>(train.size), &ids_of_all);
  const std::set<uint64_t> features(ids_of_all.begin(), ids_of_all.end());
  uint64_t rows = 0;
  for (int s = 0; s < 2; ++s) {
    const RowTable& table = cluster.server(s).shard()->store().table(0);
    uint64_t owned = 0;
    for (uint64_t id : features) owned += RowShard(0, id, 2) == s;
    CHECK(table.rows() == owned);
    rows += table.rows();
    proto::ShardStatus status;
    cluster.server(s).shard()->GetStatus(&status);
    REQUIRE(status.tables_size() == 1);
    CHECK(status.tables(0).rows() == owned);
    CHECK(status.tables(0).rows_pushed() >= owned);
    CHECK(status.tables(0).rows_pulled() > 0);
  }
  CHECK(rows == features.size());
  // Shard 0's epoch metrics: well above chance on the test share.
  proto::ShardStatus status;
  cluster.server(0).shard()->GetStatus(&status);
  REQUIRE(status.epochs_size() == 2);
  // 2 epochs of 2048 images: far from converged, well above chance (0.1).
  CHECK(status.epochs(1).test_accuracy() > 0.35);

  // A plain protobuf client reads rows of shard 1 over the wire: a row
  // never pushed at its initial value, and a pushed one as the shard has
  // it.
  auto channel = grpc::CreateChannel(cluster.addresses()[1],
                                     grpc::InsecureChannelCredentials());
  auto stub = proto::ParameterService::NewStub(channel);
  // Rank 0 registers again (it finished): propose, then join there.
  proto::RegisterResponse joined;
  for (bool join : {false, true}) {
    proto::RegisterRequest r;
    r.set_job_id(config.job_id);
    r.set_rank(0);
    r.set_plan_fingerprint(cluster.server(1).shard()->plan().fingerprint());
    r.set_join(join);
    r.set_clock(joined.clock());
    grpc::ClientContext c;
    REQUIRE(stub->Register(&c, r, &joined).ok());
  }
  uint64_t pushed = 0, fresh = 0;
  for (uint64_t id = 0; fresh == 0 || pushed == 0; ++id) {
    if (RowShard(0, id, 2) != 1) continue;
    if (features.count(id) != 0 && pushed == 0) pushed = id;
    if (features.count(id) == 0 && fresh == 0) fresh = id;
  }
  const std::vector<uint64_t> ids = {std::min(pushed, fresh),
                                     std::max(pushed, fresh)};
  proto::PullRowsRequest request;
  request.set_job_id(config.job_id);
  request.set_rank(0);
  request.set_clock(joined.clock());
  request.set_table(0);
  request.set_ids(EncodeRowIds(ids));
  proto::PullRowsResponse response;
  grpc::ClientContext context;
  const grpc::Status s = stub->PullRows(&context, request, &response);
  INFO(s.error_message());
  REQUIRE(s.ok());
  REQUIRE(response.data().size() == 2 * 8 * sizeof(float));
  std::vector<float> got(16), want(16);
  std::memcpy(got.data(), response.data().data(), 64);
  cluster.server(1).shard()->store().table(0).Read(ids, want.data());
  CHECK(got == want);
  std::vector<float> init(8);
  InitRow(config.model.embeddings[0], config.seed, 0, fresh,
          absl::MakeSpan(init));
  const size_t at = fresh == ids[0] ? 0 : 8;
  CHECK(std::vector<float>(got.begin() + at, got.begin() + at + 8) == init);
}

TEST_CASE("an embedding_bag job trains under async and ssp",
          "[integration][embedding]") {
  for (const std::string policy : {"async", "ssp"}) {
    const JobConfig config = HashedJob(policy);
    testing::LocalCluster cluster(config);
    const Run run = TrainAll(config, cluster);
    for (const auto& l : run.losses) {
      REQUIRE(l.size() == 64);
      CHECK(Mean(l, 48, 64) < 0.7 * Mean(l, 0, 16));
    }
    uint64_t rows = 0;
    for (int s = 0; s < 2; ++s) {
      rows += cluster.server(s).shard()->store().table(0).rows();
    }
    CHECK(rows > 1000);
  }
}

// A job of `fields` click-log fields (and `dense` dense features),
// concatenated rows of dim 4 into a logistic head, trained on `train` and
// evaluated on `test`; the table's policy `table_policy` ("": the job's).
JobConfig ClickJob(const std::string& train, const std::string& test,
                   int fields, int dense = 0,
                   const std::string& table_policy = "") {
  testing::JobOptions o;
  o.epochs = 1;
  o.batch_size = 128;
  o.shuffle = false;
  o.model_type = "embedding_concat";
  o.layers =
      absl::StrCat("\n    - embedding_concat: {table: clicks, fields: ", fields,
                   ", dense: ", dense, "}\n    - dense: {out: 2}\n");
  o.model_extra =
      "  embeddings:\n"
      "    - name: clicks\n"
      "      rows: 4294967296\n"
      "      dim: 4\n"
      "      init_scale: 0.01\n"
      "      optimizer: {type: adagrad, learning_rate: 0.2}\n";
  if (!table_policy.empty()) {
    absl::StrAppend(&o.model_extra, "      policy: ", table_policy, "\n");
  }
  o.data = absl::StrCat("  format: clicks\n  train_file: ", train,
                        "\n  test_file: ", test, "\n");
  o.learning_rate = 0.05;
  return testing::MakeJob(o, testing::NewTempDir());
}

TEST_CASE("an embedding_concat job trains on a click-log file over gRPC",
          "[integration][embedding][clicks]") {
  ClickLogOptions options;
  options.seed = 3;
  options.fields = 6;
  options.zipf = 1.3;  // Few values per field: rows are seen often.
  options.teacher_scale = 1.0;
  const ClickLog log(options);
  const std::string dir = testing::NewTempDir();
  const std::string train = dir + "/train.tsv", test = dir + "/test.tsv";
  absl::StatusOr<ClickLogFigures> train_figures =
      WriteClickLogFile(log, 0, 40000, train);
  absl::StatusOr<ClickLogFigures> test_figures =
      WriteClickLogFile(log, 1000000, 4000, test);
  REQUIRE(train_figures.ok());
  REQUIRE(test_figures.ok());
  // Trains the job with the table's policy `table_policy` (under sync:
  // "", the rows in the round's mean; "async", applied as each push
  // comes), checks what holds either way, and returns each rank's mean
  // loss over its last tenth of steps.
  auto train_and_check = [&](const std::string& table_policy) {
    INFO("table policy '" << table_policy << "'");
    const JobConfig config =
        ClickJob(train, test, options.fields, 0, table_policy);
    testing::LocalCluster cluster(config);
    const Run run = TrainAll(config, cluster);
    // The dense layer is sync either way: the same on both ranks.
    CHECK(run.trainers[0]->params() == run.trainers[1]->params());
    std::vector<double> last;
    for (const auto& l : run.losses) {
      REQUIRE(l.size() == 40000 / 2 / 128 + 1);
      const size_t n = l.size(), tenth = n / 10;
      // Progressive validation: each batch's loss is on samples not yet seen.
      INFO("first tenth " << Mean(l, 0, tenth) << ", last tenth "
                          << Mean(l, n - tenth, n) << ", the teacher's "
                          << train_figures->teacher_loss);
      CHECK(Mean(l, n - tenth, n) < Mean(l, 0, tenth) - 0.05);
      last.push_back(Mean(l, n - tenth, n));
    }
    // The table holds a row for each distinct (field, value) of the file.
    std::set<uint64_t> values;
    auto file = ClickLogFile::Open(train, options.fields, 0,
                                   config.model.embeddings[0].rows, 0, 0, 1);
    REQUIRE(file.ok());
    std::vector<uint64_t> ids(options.fields);
    int32_t label = 0;
    for (int64_t i = 0; i < (*file)->size(); ++i) {
      REQUIRE(*(*file)->Read(i, 1, ids.data(), nullptr, &label) == 1);
      values.insert(ids.begin(), ids.end());
    }
    uint64_t rows = 0;
    for (int s = 0; s < 2; ++s) {
      rows += cluster.server(s).shard()->store().table(0).rows();
    }
    CHECK(rows == values.size());
    // Evaluated on the test file: near the teacher's accuracy, well above
    // always answering "no click".
    proto::ShardStatus status;
    cluster.server(0).shard()->GetStatus(&status);
    REQUIRE(status.epochs_size() == 1);
    INFO("teacher accuracy " << test_figures->teacher_accuracy << ", clicks "
                             << test_figures->clicks);
    CHECK(status.epochs(0).test_accuracy() > 1 - test_figures->clicks + 0.02);
    CHECK(status.epochs(0).test_accuracy() >
          test_figures->teacher_accuracy - 0.08);
    // A binary classifier's evaluation also gives the AUC of the ranks'
    // scores together, and their log loss: well above chance, no better
    // than the teacher's (beyond the bins' bound), near its log loss.
    const proto::EpochMetrics& e = status.epochs(0);
    REQUIRE(e.test_scored());
    INFO("AUC " << e.test_auc() << " +- " << e.test_auc_error()
                << ", the teacher's " << test_figures->teacher_auc
                << "; log loss " << e.test_log_loss() << ", the teacher's "
                << test_figures->teacher_loss);
    CHECK(e.test_auc_error() < 1e-3);
    CHECK(e.test_auc() > 0.5 + (test_figures->teacher_auc - 0.5) * 0.8);
    CHECK(e.test_auc() < test_figures->teacher_auc + e.test_auc_error());
    CHECK(e.test_log_loss() < test_figures->teacher_loss + 0.1);
    REQUIRE(status.tables_size() == 1);
    CHECK(status.tables(0).policy() ==
          (table_policy.empty() ? "sync" : table_policy));
    return last;
  };
  const std::vector<double> sync = train_and_check("");
  for (double l : sync) CHECK(l < train_figures->teacher_loss + 0.1);
  // The async table's rows step once per push at its full gradient, in
  // the order pushes come: as good as the round's mean, within what that
  // order changes (each rank's last tenth: ±0.0003 over runs here).
  const std::vector<double> async = train_and_check("async");
  for (size_t r = 0; r < sync.size(); ++r) {
    INFO("rank " << r << ": " << async[r] << " async, " << sync[r] << " sync");
    CHECK(async[r] < sync[r] + 0.003);
  }
}

// `path` with every dense count set to 0: the same samples and labels,
// nothing to learn from the counts.
std::string WithoutCounts(const std::string& path, int dense) {
  std::ifstream in(path);
  std::string text, line;
  while (std::getline(in, line)) {
    std::vector<std::string> cols = absl::StrSplit(line, '\t');
    for (int j = 1; j <= dense; ++j) cols[j] = "0";
    absl::StrAppend(&text, absl::StrJoin(cols, "\t"), "\n");
  }
  return testing::WriteFile(path + ".zeros", text);
}

TEST_CASE("a click log's dense features reach the model and are learned",
          "[integration][embedding][clicks][dense]") {
  ClickLogOptions options;
  options.seed = 5;
  options.fields = 4;
  options.zipf = 1.3;
  options.dense = 4;
  options.dense_scale = 1.5;
  const ClickLog log(options);
  const std::string dir = testing::NewTempDir();
  const std::string train = dir + "/train.tsv", test = dir + "/test.tsv";
  REQUIRE(WriteClickLogFile(log, 0, 20000, train).ok());
  absl::StatusOr<ClickLogFigures> test_figures =
      WriteClickLogFile(log, 1000000, 4000, test);
  REQUIRE(test_figures.ok());
  // The AUC of the job on (train, test).
  auto auc = [&](const std::string& on_train, const std::string& on_test) {
    const JobConfig config =
        ClickJob(on_train, on_test, options.fields, options.dense);
    testing::LocalCluster cluster(config);
    const Run run = TrainAll(config, cluster);
    CHECK(run.trainers[0]->params() == run.trainers[1]->params());
    proto::ShardStatus status;
    cluster.server(0).shard()->GetStatus(&status);
    REQUIRE(status.epochs_size() == 1);
    REQUIRE(status.epochs(0).test_scored());
    return status.epochs(0).test_auc();
  };
  const double with_counts = auc(train, test);
  const double without = auc(WithoutCounts(train, options.dense),
                             WithoutCounts(test, options.dense));
  INFO("AUC " << with_counts << " with the counts, " << without
              << " with them zeroed; the teacher's "
              << test_figures->teacher_auc);
  CHECK(with_counts > without + 0.03);
  CHECK(with_counts < test_figures->teacher_auc + 0.002);
}

}  // namespace
}  // namespace paramd
