// The training loop through an in-process cluster (no sockets): one clock
// per step, every epoch evaluated and reported, a dropped rank registering
// again, errors from the client surfacing whole.
#include "worker/trainer.h"

#include <catch2/catch.hpp>
#include <map>
#include <thread>
#include <vector>

#include "tests/in_process_client.h"
#include "tests/test_files.h"
#include "worker/data/dataset.h"
#include "worker/model/model_factory.h"

namespace paramd {
namespace {

using testing::InProcessCluster;
using testing::JobOptions;

// One worker, two shards, sync: 256 samples in batches of 32 make 8 steps
// per epoch.
JobConfig SmallJob(int epochs) {
  JobOptions o;
  o.workers = 1;
  o.layers = "[784, 16, 10]";
  o.epochs = epochs;
  o.batch_size = 32;
  o.train_limit = 256;
  o.test_limit = 200;
  o.chunk_bytes = 4096;
  return testing::MakeJob(o, testing::NewTempDir());
}

std::unique_ptr<Trainer> MakeTrainer(const JobConfig& config,
                                     InProcessCluster& cluster,
                                     TrainerOptions options) {
  auto trainer =
      Trainer::Create(config, 0, std::move(options), cluster.ClientFactory());
  INFO(trainer.status().ToString());
  REQUIRE(trainer.ok());
  return *std::move(trainer);
}

TEST_CASE("each step pulls, pushes and moves the clock by one", "[trainer]") {
  const JobConfig config = SmallJob(2);
  InProcessCluster cluster(config);
  std::vector<uint64_t> stepped;
  std::map<uint64_t, int> pulled;  // version → times
  TrainerOptions options;
  options.max_steps = 5;
  options.on_step = [&](uint64_t clock, double loss) {
    CHECK(loss > 0);
    stepped.push_back(clock);
  };
  options.on_pull = [&](uint64_t version, absl::Span<const float>) {
    ++pulled[version];
  };
  auto trainer = MakeTrainer(config, cluster, options);
  REQUIRE(trainer->Run().ok());

  CHECK(stepped == std::vector<uint64_t>{0, 1, 2, 3, 4});
  // The first pull, then one per step; the last is not pulled again.
  CHECK(pulled == std::map<uint64_t, int>{
                      {0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}});
  CHECK(cluster.calls().pushes == 5);
  CHECK(cluster.calls().registrations == 1);
  CHECK(cluster.calls().epoch_reports == 0);  // 5 of 8 steps: no epoch end
  for (int k = 0; k < cluster.num_shards(); ++k) {
    CHECK(cluster.shard(k).store().version() == 5);
  }
}

TEST_CASE("every epoch is evaluated on the final parameters and reported",
          "[trainer]") {
  const JobConfig config = SmallJob(2);
  InProcessCluster cluster(config);
  auto trainer = MakeTrainer(config, cluster, TrainerOptions());
  REQUIRE(trainer->Run().ok());
  CHECK(cluster.calls().epoch_reports == 2);

  proto::ShardStatus status;
  cluster.shard(0).GetStatus(&status);
  REQUIRE(status.epochs_size() == 2);
  for (const proto::EpochMetrics& e : status.epochs()) {
    CHECK(e.complete());
    CHECK(e.train_samples() == 256);
    CHECK(e.test_total() == 200);
    CHECK(e.train_loss() > 0);
  }
  CHECK(status.epochs(1).train_loss() < status.epochs(0).train_loss());

  // The last epoch's accuracy is that of the parameters the worker ended
  // with, counted here on the same 200 test samples.
  absl::StatusOr<Dataset> test = LoadDataset(
      config.data.test_images, config.data.test_labels, config.data.test_limit);
  REQUIRE(test.ok());
  std::vector<int64_t> all(test->size);
  for (int64_t i = 0; i < test->size; ++i) all[i] = i;
  std::vector<float> x(test->size * test->dim);
  std::vector<int32_t> y(test->size);
  test->Gather(all.data(), static_cast<int>(test->size), x.data(), y.data());
  JobConfig cpu = config;
  cpu.worker.device = "cpu";
  auto model = MakeModel(cpu, 1024);
  REQUIRE(model.ok());
  absl::StatusOr<int64_t> correct = (*model)->CountCorrect(
      trainer->params(), x.data(), y.data(), static_cast<int>(test->size));
  REQUIRE(correct.ok());
  CHECK(status.epochs(1).test_accuracy() ==
        Approx(static_cast<double>(*correct) / 200).margin(1e-12));
  CHECK(*correct > 40);  // well above chance (20 of 200)
}

TEST_CASE(
    "the next batch made while a step waits is the batch the step would "
    "make: the same parameters whether the client runs that work or drops "
    "it",
    "[trainer]") {
  // Three shuffled epochs of 8 steps: the work is never carried across an
  // epoch's end, where the next order is drawn.
  const JobConfig config = SmallJob(3);
  REQUIRE(config.training.shuffle);
  std::vector<float> params[2];
  for (const bool run : {true, false}) {
    INFO((run ? "run" : "dropped"));
    InProcessCluster cluster(config);
    cluster.set_run_while_waiting(run);
    auto trainer = MakeTrainer(config, cluster, TrainerOptions());
    REQUIRE(trainer->Run().ok());
    CHECK(cluster.calls().pushes == 24);
    // Every step but each epoch's last made the next one's batch.
    CHECK(cluster.calls().while_waiting == (run ? 3 * 7 : 0));
    params[run ? 0 : 1] = trainer->params();
  }
  REQUIRE(params[0].size() == params[1].size());
  CHECK(params[0] == params[1]);
}

TEST_CASE("a rank the shards dropped registers again and carries on",
          "[trainer]") {
  const JobConfig config = SmallJob(1);
  InProcessCluster cluster(config);
  std::vector<uint64_t> stepped;
  TrainerOptions options;
  options.on_step = [&](uint64_t clock, double) {
    stepped.push_back(clock);
    // As if its lease had expired on shard 0 after its push of clock 2.
    if (clock == 2) cluster.shard(0).policy().Leave(0);
  };
  auto trainer = MakeTrainer(config, cluster, options);
  absl::Status run = trainer->Run();
  INFO(run.ToString());
  REQUIRE(run.ok());

  // The push of clock 3 was refused with Aborted; the worker registered
  // again at clock 3 and took every step of the epoch once.
  CHECK(cluster.calls().aborted == 1);
  CHECK(cluster.calls().registrations == 2);
  CHECK(stepped == std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  for (int k = 0; k < cluster.num_shards(); ++k) {
    CHECK(cluster.shard(k).store().version() == 8);
  }
  CHECK(cluster.calls().epoch_reports == 1);
}

// SmallJob with a typed graph on `input`, for `workers` workers.
JobConfig GraphJob(const std::string& input, const std::string& layers,
                   int workers = 1) {
  JobOptions o;
  o.workers = workers;
  o.layers = layers;
  o.model_extra = input;
  o.epochs = 2;
  o.batch_size = 32;
  o.train_limit = 256;
  o.test_limit = 200;
  o.chunk_bytes = 4096;
  return testing::MakeJob(o, testing::NewTempDir());
}

constexpr char kSmallCnn[] =
    "\n    - conv2d: {out: 4, kernel: 3, stride: 2}\n    - relu\n"
    "    - max_pool2d: {kernel: 2}\n    - flatten\n"
    "    - dropout: {p: 0.1}\n    - dense: {out: 10}\n";

TEST_CASE("a CNN trains through the servers like the MLP", "[trainer]") {
  const JobConfig config =
      GraphJob("  input: {channels: 1, height: 28, width: 28}\n", kSmallCnn);
  InProcessCluster cluster(config);
  auto trainer = MakeTrainer(config, cluster, TrainerOptions());
  REQUIRE(trainer->Run().ok());
  proto::ShardStatus status;
  cluster.shard(0).GetStatus(&status);
  REQUIRE(status.epochs_size() == 2);
  CHECK(status.epochs(1).train_loss() < status.epochs(0).train_loss());
  CHECK(status.epochs(1).test_accuracy() > 0.3);  // chance: 0.1
}

TEST_CASE(
    "batch norm's statistics are the servers': every worker holds the same",
    "[trainer]") {
  const JobConfig config = GraphJob(
      "  input: {channels: 1, height: 28, width: 28}\n",
      "\n    - conv2d: {out: 4, kernel: 3, stride: 2}\n    - batch_norm\n"
      "    - relu\n    - flatten\n    - dense: {out: 10}\n",
      /*workers=*/2);
  InProcessCluster cluster(config);
  std::vector<std::unique_ptr<Trainer>> trainers;
  for (int rank = 0; rank < 2; ++rank) {
    auto t = Trainer::Create(config, rank, TrainerOptions(),
                             cluster.ClientFactory());
    REQUIRE(t.ok());
    trainers.push_back(*std::move(t));
  }
  std::vector<absl::Status> results(2);
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] { results[r] = trainers[r]->Run(); });
    }
    for (std::thread& t : threads) t.join();
  }
  REQUIRE(results[0].ok());
  REQUIRE(results[1].ok());
  // Under sync both end on the same version: statistics included.
  CHECK(trainers[0]->params() == trainers[1]->params());
  const ModelSpec spec = BuildModelSpec(config.model);
  const FlatLayout layout(spec);
  int statistics = 0;
  for (size_t t = 0; t < spec.tensors.size(); ++t) {
    if (spec.tensors[t].kind != TensorKind::kStatistic) continue;
    ++statistics;
    // The running values moved from their initial 0 (mean) and 1 (var).
    for (int64_t i = 0; i < spec.tensors[t].num_elements; ++i) {
      CHECK(trainers[0]->params()[layout.offset[t] + i] !=
            spec.tensors[t].init_value);
    }
  }
  CHECK(statistics == 2);
  proto::ShardStatus status;
  cluster.shard(0).GetStatus(&status);
  REQUIRE(status.epochs_size() == 2);
  CHECK(status.epochs(1).test_accuracy() > 0.3);  // chance: 0.1
}

TEST_CASE("a graph whose input does not fit the data is refused", "[trainer]") {
  InProcessCluster cluster(SmallJob(1));
  struct Case {
    const char* input;
    const char* layers;
    const char* expect;
  };
  const Case cases[] = {
      {"  input: {channels: 1, height: 14, width: 56}\n", kSmallCnn,
       "model.input: 1×14×56 but the data's images are 1×28×28"},
      {"  input: {channels: 1, height: 28, width: 27}\n", kSmallCnn,
       "model.input: the input is 1×28×27 (756 values) but the data has 784 "
       "pixels per image"},
      {"  input: 780\n", "\n    - dense: {out: 10}\n",
       "model.input: the input is flat 780 (780 values) but the data has 784 "
       "pixels per image"},
  };
  for (const Case& c : cases) {
    const JobConfig config = GraphJob(c.input, c.layers);
    auto trainer =
        Trainer::Create(config, 0, TrainerOptions(), cluster.ClientFactory());
    INFO(c.input);
    CHECK(absl::IsInvalidArgument(trainer.status()));
    CHECK_THAT(std::string(trainer.status().message()),
               Catch::Contains(c.expect));
  }
}

TEST_CASE("a client that cannot be made stops the run with its error",
          "[trainer]") {
  const JobConfig config = SmallJob(1);
  auto trainer =
      Trainer::Create(config, 0, TrainerOptions(),
                      [](const ClientSetup&)
                          -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
                        return absl::InvalidArgumentError(
                            "--servers: 1 addresses for 2 shards");
                      });
  REQUIRE(trainer.ok());
  const absl::Status run = (*trainer)->Run();
  CHECK(absl::IsInvalidArgument(run));
  CHECK(run.message() == "--servers: 1 addresses for 2 shards");
}

TEST_CASE("a rank outside the job is refused up front", "[trainer]") {
  const JobConfig config = SmallJob(1);
  InProcessCluster cluster(config);
  auto trainer =
      Trainer::Create(config, 1, TrainerOptions(), cluster.ClientFactory());
  CHECK(absl::IsInvalidArgument(trainer.status()));
  CHECK(trainer.status().message() ==
        "--rank: 1 is outside [0, 1) for the job's cluster.workers");
}

}  // namespace
}  // namespace paramd
