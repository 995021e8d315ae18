// The job file: good files load into the typed config; each kind of bad
// file is refused with one line naming file, line and field.
#include "common/config/job_config.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/config/job_file.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using testing::JobOptions;
using testing::JobYaml;
using testing::JobYamlError;
using testing::NewTempDir;
using testing::WriteFile;

// The line (1-based) of the first line of `yaml` containing `needle`.
int LineOf(const std::string& yaml, const std::string& needle) {
  int line = 1;
  const size_t at = yaml.find(needle);
  REQUIRE(at != std::string::npos);
  for (size_t i = 0; i < at; ++i) line += yaml[i] == '\n';
  return line;
}

// An embedding model over click logs (data.format clicks), its data
// section `data`.
JobOptions ClickJob(const std::string& data) {
  JobOptions o;
  o.model_type = "embedding_concat";
  o.shuffle = false;
  o.layers =
      "\n    - embedding_concat: {table: clicks, fields: 2}\n"
      "    - dense: {out: 2}\n";
  o.model_extra =
      "  embeddings:\n    - {name: clicks, rows: 4294967296, dim: 4}\n";
  o.data = data;
  return o;
}

TEST_CASE("a good job file loads with every field typed", "[config]") {
  JobOptions o;
  o.servers = {"127.0.0.1:7001", "127.0.0.1:7002"};
  const std::string path = WriteFile(NewTempDir() + "/job.yaml", JobYaml(o));
  absl::StatusOr<JobConfig> c = LoadJobConfig(path);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->job_id == "test-job");
  CHECK(c->seed == 7);
  CHECK(c->servers ==
        std::vector<std::string>{"127.0.0.1:7001", "127.0.0.1:7002"});
  CHECK(c->num_shards() == 2);
  CHECK(c->num_workers == 2);
  CHECK(c->model.layers == std::vector<int>{784, 64, 10});
  CHECK(c->training.epochs == 2);
  CHECK(c->training.batch_size == 32);
  CHECK(c->training.shuffle);
  CHECK(c->optimizer.type == "sgd");
  CHECK(c->optimizer.learning_rate == Approx(0.05));
  CHECK(c->optimizer.momentum == Approx(0.9));
  CHECK(c->policy.type == PolicyType::kSync);
  CHECK(c->chunk_bytes == 16384);
  CHECK(c->data.train_limit == 2048);
  CHECK(c->data.train_images ==
        std::string(testing::kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
  CHECK(c->worker.device == "auto");
  CHECK(c->worker.threads == 1);
  CHECK(c->worker.shared_memory);          // auto
  CHECK(c->limits.stream_window_kb == 0);  // gRPC's adaptive windows
}

TEST_CASE("a key given twice is refused, naming it and both lines",
          "[config]") {
  JobOptions o;
  const std::string yaml = JobYaml(o);
  // A whole section twice: yaml-cpp would read the first and drop the
  // second (here, more epochs) without a word.
  const std::string twice = yaml + "training:\n  epochs: 9\n";
  absl::StatusOr<JobConfig> c = ParseJobConfig(twice, "j.yaml");
  REQUIRE_FALSE(c.ok());
  CHECK(std::string(c.status().message()) ==
        absl::StrCat("j.yaml:", LineOf(twice, "training:\n  epochs: 9"),
                     ": training: given twice (first at line ",
                     LineOf(twice, "training:"), "); give each key once"));
  // A key twice inside a section.
  const std::string inner = absl::StrReplaceAll(
      yaml, {{"momentum: 0.9", "momentum: 0.9\n  momentum: 0.5"}});
  c = ParseJobConfig(inner, "j.yaml");
  REQUIRE_FALSE(c.ok());
  CHECK_THAT(
      std::string(c.status().message()),
      Catch::StartsWith(absl::StrCat("j.yaml:", LineOf(inner, "momentum: 0.5"),
                                     ": optimizer.momentum: given twice")));
}

TEST_CASE("limits.stream_window_kb fixes the steps' stream window",
          "[config]") {
  JobOptions o;
  const std::string path =
      WriteFile(NewTempDir() + "/job.yaml",
                JobYaml(o) + "limits:\n  stream_window_kb: 4096\n");
  absl::StatusOr<JobConfig> c = LoadJobConfig(path);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->limits.stream_window_kb == 4096);
}

TEST_CASE("the shipped main job validates", "[config]") {
  absl::StatusOr<JobConfig> c = LoadJobConfig("configs/fashion_mnist_mlp.yaml");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->policy.type == PolicyType::kSync);
  CHECK(c->num_shards() == 2);
  CHECK(c->num_workers == 2);
  CHECK(c->model.layers == std::vector<int>{784, 256, 128, 10});
}

TEST_CASE("the shipped hashed-feature job validates", "[config]") {
  absl::StatusOr<JobConfig> c =
      LoadJobConfig("configs/fashion_mnist_hashed.yaml");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->model.type == ModelType::kEmbeddingBag);
  REQUIRE(c->model.embeddings.size() == 1);
  CHECK(c->model.embeddings[0].rows == 1u << 20);
  CHECK(c->model.embeddings[0].schedule.type == ScheduleType::kCosine);
  CHECK(c->model.layers.front() == c->model.embeddings[0].dim);
}

TEST_CASE("relative data paths resolve against the job file's folder",
          "[config]") {
  const std::string dir = NewTempDir();
  std::string yaml = absl::StrReplaceAll(
      JobYaml(JobOptions{}),
      {{std::string("dir: ") + testing::kFashionMnistDir, "dir: data"}});
  REQUIRE(system(absl::StrCat("mkdir -p ", dir, "/data && cp ",
                              testing::kFashionMnistDir, "/*labels* ", dir,
                              "/data/ && touch ", dir,
                              "/data/train-images-idx3-ubyte.gz ", dir,
                              "/data/t10k-images-idx3-ubyte.gz")
                     .c_str()) == 0);
  const std::string path = WriteFile(dir + "/job.yaml", yaml);
  absl::StatusOr<JobConfig> c = LoadJobConfig(path);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->data.test_labels == dir + "/data/t10k-labels-idx1-ubyte.gz");
}

TEST_CASE(
    "with data_files_readable off, a job whose data is elsewhere loads its "
    "model and its resolved paths, and nothing else is relaxed",
    "[config]") {
  const std::string dir = NewTempDir();
  // The GPU bundle's case: the job file is here, its dataset is not.
  const std::string yaml = absl::StrReplaceAll(
      JobYaml(JobOptions{}),
      {{std::string("dir: ") + testing::kFashionMnistDir, "dir: data"}});
  const std::string path = WriteFile(dir + "/job.yaml", yaml);
  absl::StatusOr<JobConfig> checked = LoadJobConfig(path);
  REQUIRE_FALSE(checked.ok());
  CHECK_THAT(std::string(checked.status().message()),
             Catch::Contains("data.train_images: cannot "
                             "read"));

  JobFileChecks model_only;
  model_only.data_files_readable = false;
  absl::StatusOr<JobConfig> c = LoadJobConfig(path, model_only);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->data.train_images == dir + "/data/train-images-idx3-ubyte.gz");
  CHECK(c->data.test_labels == dir + "/data/t10k-labels-idx1-ubyte.gz");
  CHECK(c->model.layers == std::vector<int>{784, 64, 10});

  // Every other check still holds: a bad value is refused as before.
  absl::StatusOr<JobConfig> bad = ParseJobConfig(
      absl::StrReplaceAll(yaml, {{"momentum: 0.9", "momentum: 1.5"}}), path,
      model_only);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()),
             Catch::Contains("optimizer.momentum"));

  // Click logs too.
  JobOptions o = ClickJob("  format: clicks\n  train_file: train.tsv\n");
  const std::string clicks = WriteFile(dir + "/clicks.yaml", JobYaml(o));
  CHECK_FALSE(LoadJobConfig(clicks).ok());
  absl::StatusOr<JobConfig> k = LoadJobConfig(clicks, model_only);
  INFO(k.status().ToString());
  REQUIRE(k.ok());
  CHECK(k->data.train_file == dir + "/train.tsv");
}

TEST_CASE("data.augment reads crop_padding and flip, and refuses the rest",
          "[config][augment]") {
  const std::string good = JobYaml(JobOptions{});
  const auto with = [&](const std::string& augment) {
    return absl::StrReplaceAll(
        good,
        {{"\n  test_limit:", "\n  augment: " + augment + "\n  test_limit:"}});
  };
  std::string path;
  REQUIRE(testing::JobYamlError(with("{crop_padding: 2, flip: true}"), &path) ==
          "");
  absl::StatusOr<JobConfig> c = LoadJobConfig(path);
  REQUIRE(c.ok());
  CHECK(c->data.augment.crop_padding == 2);
  CHECK(c->data.augment.flip);
  CHECK(c->data.augment.enabled());
  REQUIRE(testing::JobYamlError(good, &path) == "");
  c = LoadJobConfig(path);
  REQUIRE(c.ok());
  CHECK_FALSE(c->data.augment.enabled());

  const std::string negative =
      testing::JobYamlError(with("{crop_padding: -1}"));
  CHECK_THAT(negative, Catch::Contains("data.augment.crop_padding") &&
                           Catch::Contains("must be 0 (no crop) to 16") &&
                           Catch::Contains("got -1"));
  CHECK_THAT(testing::JobYamlError(with("{crop_padding: 17}")),
             Catch::Contains("data.augment.crop_padding"));
  CHECK_THAT(testing::JobYamlError(with("{flip: sometimes}")),
             Catch::Contains("data.augment.flip") &&
                 Catch::Contains("expected a boolean"));
  CHECK_THAT(testing::JobYamlError(with("{rotate: 10}")),
             Catch::Contains("data.augment") && Catch::Contains("rotate"));
}

TEST_CASE("each bad job file names file, line and field", "[config]") {
  const std::string good = JobYaml(JobOptions{});
  struct Case {
    const char* what;
    std::string yaml;
    std::string field;
    std::string line_of;  // Text on the line the error must point at.
    std::string message;
  };
  const std::vector<Case> cases = {
      {"missing field", absl::StrReplaceAll(good, {{"  batch_size: 32\n", ""}}),
       "training.batch_size", "training:", "missing required field"},
      {"missing section",
       absl::StrReplaceAll(good, {{"policy:\n  type: sync\n", ""}}), "policy",
       "job:", "missing required section"},
      {"wrong type (string for integer)",
       absl::StrReplaceAll(good, {{"epochs: 2", "epochs: two"}}),
       "training.epochs", "epochs: two", "expected an integer, got 'two'"},
      {"wrong type (mapping for number)",
       absl::StrReplaceAll(good,
                           {{"learning_rate: 0.05", "learning_rate: {a: 1}"}}),
       "optimizer.learning_rate", "learning_rate:", "expected a number"},
      {"wrong type (list for servers)",
       absl::StrReplaceAll(good,
                           {{"servers: [\"127.0.0.1:0\", \"127.0.0.1:0\"]",
                             "servers: 127.0.0.1"}}),
       "cluster.servers", "servers:", "expected a non-empty list"},
      {"unknown policy",
       absl::StrReplaceAll(good, {{"type: sync", "type: bsp"}}), "policy.type",
       "type: bsp", "unknown policy 'bsp'"},
      {"ssp without staleness",
       absl::StrReplaceAll(good, {{"type: sync", "type: ssp"}}),
       "policy.staleness", "policy:", "missing required field"},
      {"staleness for sync",
       absl::StrReplaceAll(good,
                           {{"type: sync", "type: sync\n  staleness: 2"}}),
       "policy.staleness", "staleness: 2", "only applies to policy.type ssp"},
      {"clip_norm not positive",
       absl::StrReplaceAll(good, {{"learning_rate: 0.05",
                                   "learning_rate: 0.05\n  clip_norm: 0"}}),
       "optimizer.clip_norm", "clip_norm: 0", "must be > 0"},
      {"guard loss_spike not above 1", good + "guard:\n  loss_spike: 1\n",
       "guard.loss_spike", "loss_spike: 1", "must be > 1"},
      {"guard with an unknown action", good + "guard:\n  on_diverge: skip\n",
       "guard.on_diverge", "on_diverge: skip",
       "unknown action 'skip' (expected: warn, skip_push or stop)"},
      {"guard with an unknown key", good + "guard:\n  spike: 3\n",
       "guard.spike", "spike: 3", "unknown"},
      {"both names of the stall time",
       absl::StrReplaceAll(
           good, {{"stall_warn_seconds: 30",
                   "stall_warn_seconds: 30\n  warn_after_seconds: 5"}}),
       "liveness.warn_after_seconds", "warn_after_seconds: 5",
       "older name of liveness.stall_warn_seconds"},
      {"tracing without a dir", good + "tracing:\n  steps: 3\n", "tracing.dir",
       "tracing:", "missing required field"},
      {"tracing no steps", good + "tracing:\n  dir: t\n  steps: 0\n",
       "tracing.steps", "steps: 0", "must be between 1 and 100000"},
      {"staleness scaling for sync",
       absl::StrReplaceAll(
           good, {{"type: sync", "type: sync\n  staleness_scaling: inverse"}}),
       "policy.staleness_scaling", "staleness_scaling: inverse",
       "only applies to policy.type async or ssp"},
      {"unknown staleness scaling",
       absl::StrReplaceAll(
           good, {{"type: sync", "type: async\n  staleness_scaling: sqrt"}}),
       "policy.staleness_scaling", "staleness_scaling: sqrt",
       "unknown scaling 'sqrt' (expected: none or inverse)"},
      {"lease shorter than two heartbeats",
       absl::StrReplaceAll(
           good, {{"lease_seconds: 10", "lease_seconds: 1"},
                  {"heartbeat_seconds: 1", "heartbeat_seconds: 0.8"}}),
       "liveness.heartbeat_seconds", "heartbeat_seconds: 0.8", "at most half"},
      {"keepalive shorter than two heartbeats",
       absl::StrReplaceAll(good, {{"stall_warn_seconds: 30",
                                   "stall_warn_seconds: 30\n"
                                   "  keepalive_seconds: 1.5"}}),
       "liveness.keepalive_seconds", "keepalive_seconds: 1.5",
       "at least twice liveness.heartbeat_seconds"},
      {"keepalive not positive",
       absl::StrReplaceAll(good, {{"stall_warn_seconds: 30",
                                   "stall_warn_seconds: 30\n"
                                   "  keepalive_seconds: 0"}}),
       "liveness.keepalive_seconds", "keepalive_seconds: 0", "must be > 0"},
      {"slow rank outside the cluster",
       good + "testing:\n  slow_rank: 2\n  slow_step_ms: 5\n",
       "testing.slow_rank", "slow_rank: 2", "must be a rank in [0, 2)"},
      {"in-flight limit below a push and a pull",
       good + "limits:\n  max_inflight_per_worker: 1\n",
       "limits.max_inflight_per_worker", "max_inflight_per_worker: 1",
       "must be between 2"},
      {"negative transport memory",
       good + "limits:\n  transport_memory_mb: -5\n",
       "limits.transport_memory_mb", "transport_memory_mb: -5",
       "must be between 0"},
      {"a stream window below 64 KiB",
       good + "limits:\n  stream_window_kb: 32\n", "limits.stream_window_kb",
       "stream_window_kb: 32",
       "must be 0 (gRPC's adaptive windows) or between 64"},
      {"a certificate without its key",
       good + "security:\n  tls_cert: server.crt\n", "security.tls_key",
       "tls_cert: server.crt", "missing: tls_cert and tls_key come together"},
      {"a CA without TLS",
       good + "security:\n  token_file: token\n  tls_ca: ca.pem\n",
       "security.tls_ca", "tls_ca: ca.pem",
       "only applies with security.tls_cert and tls_key"},
      {"a client certificate without mutual TLS",
       good + "security:\n  tls_cert: s.crt\n  tls_key: s.key\n"
              "  tls_client_cert: c.crt\n  tls_client_key: c.key\n",
       "security.tls_client_cert", "tls_client_cert: c.crt",
       "only applies with security.mutual_tls: true"},
      {"unknown key at the top", good + "colour: blue\n", "colour",
       "colour: blue", "unknown key"},
      {"unknown key in a section",
       absl::StrReplaceAll(
           good, {{"  shuffle: true\n", "  shuffle: true\n  shufle: false\n"}}),
       "training.shufle", "shufle: false", "unknown key"},
      {"unreadable data path",
       absl::StrReplaceAll(good,
                           {{std::string("dir: ") + testing::kFashionMnistDir,
                             "dir: /nonexistent/fashion"}}),
       "data.train_images", "dir: /nonexistent",
       "cannot read '/nonexistent/fashion/"},
      {"out-of-range value",
       absl::StrReplaceAll(good, {{"momentum: 0.9", "momentum: 1.5"}}),
       "optimizer.momentum", "momentum: 1.5", "must be in [0, 1)"},
      {"bad server address",
       absl::StrReplaceAll(good, {{"\"127.0.0.1:0\", \"127.0.0.1:0\"",
                                   "\"127.0.0.1:0\", \"localhost\""}}),
       "cluster.servers[1]", "servers:", "expected \"host:port\""},
      {"unknown optimizer",
       absl::StrReplaceAll(good, {{"type: sgd", "type: lion"}}),
       "optimizer.type", "type: lion", "unknown optimizer 'lion'"},
      {"a key another optimizer takes",
       absl::StrReplaceAll(good, {{"type: sgd", "type: adam"}}),
       "optimizer.momentum", "momentum: 0.9",
       "does not apply to optimizer.type adam"},
      {"unknown schedule",
       absl::StrReplaceAll(
           good, {{"  momentum: 0.9\n",
                   "  momentum: 0.9\n  schedule:\n    type: exponential\n"}}),
       "optimizer.schedule.type", "type: exponential", "unknown schedule"},
      {"cosine without total_steps",
       absl::StrReplaceAll(
           good, {{"  momentum: 0.9\n",
                   "  momentum: 0.9\n  schedule:\n    type: cosine\n"}}),
       "optimizer.schedule.total_steps", "type: cosine",
       "needs total_steps > warmup_steps"},
      {"unknown compression", good + "compression:\n  type: int8\n",
       "compression.type", "type: int8",
       "'int8' is not one of: none, fp16, topk"},
      {"top-k ratio out of range",
       good + "compression:\n  type: topk\n  ratio: 1.5\n", "compression.ratio",
       "ratio: 1.5", "must be in (0, 1]"},
      {"top-k ratio zero", good + "compression:\n  type: topk\n  ratio: 0\n",
       "compression.ratio", "ratio: 0", "must be in (0, 1]"},
      {"the simulated link, now real links",
       good + "testing:\n  link_mbps: 1000\n", "testing.link_mbps",
       "link_mbps: 1000",
       "is no longer a setting: shape real links between simulated hosts"},
      {"unknown pull dtype", good + "compression:\n  pull: int8\n",
       "compression.pull", "pull: int8", "'int8' is not one of: float32, fp16"},
      {"momentum correction beside server momentum",
       good + "compression:\n  type: topk\n  momentum: 0.8\n",
       "compression.momentum", "momentum: 0.8",
       "needs optimizer.type sgd with optimizer.momentum 0"},
      {"momentum correction out of range",
       absl::StrReplaceAll(good, {{"  momentum: 0.9\n", ""}}) +
           "compression:\n  type: topk\n  momentum: 1\n",
       "compression.momentum", "momentum: 1", "must be in [0, 1)"},
      {"ratio without top-k",
       good + "compression:\n  type: fp16\n  ratio: 0.1\n", "compression.ratio",
       "ratio: 0.1", "applies to type topk only"},
      {"checkpoint folder with checkpoints off",
       good + "checkpoint:\n  enabled: false\n  dir: ck\n", "checkpoint.dir",
       "dir: ck", "names a folder while checkpoint.enabled is false"},
      {"checkpoint interval with checkpoints off",
       good + "checkpoint:\n  enabled: false\n  every_steps: 5\n",
       "checkpoint.every_steps", "every_steps: 5",
       "does not apply: checkpoint.enabled is false"},
      {"incremental checkpoints, none full",
       good + "checkpoint:\n  full_every: 0\n", "checkpoint.full_every",
       "full_every: 0", "must be between 1 and 1000000"},
      {"incremental checkpoints with checkpoints off",
       good + "checkpoint:\n  enabled: false\n  full_every: 4\n",
       "checkpoint.full_every", "full_every: 4",
       "does not apply: checkpoint.enabled is false"},
      {"checkpoints on or off, not a word",
       good + "checkpoint:\n  enabled: sometimes\n", "checkpoint.enabled",
       "enabled: sometimes", "a boolean"},
      {"metrics port out of range", good + "metrics:\n  port: 70000\n",
       "metrics.port", "port: 70000", "must be between 0 (off) and 65535"},
      {"metrics bind not IPv4",
       good + "metrics:\n  port: 9400\n  bind: \"::\"\n", "metrics.bind",
       "bind: \"::\"", "must be an IPv4 address"},
      {"overlap with top-k",
       good + "compression:\n  type: topk\nworker:\n  overlap: true\n",
       "worker.overlap", "overlap: true", "not with compression topk"},
      {"overlap not a boolean", good + "worker:\n  overlap: maybe\n",
       "worker.overlap", "overlap: maybe", "a boolean"},
      {"shared memory neither auto nor off",
       good + "worker:\n  shared_memory: on\n", "worker.shared_memory",
       "shared_memory: on", "unknown setting 'on' (expected: auto or off)"},
      {"worker command not a list", good + "worker:\n  command: train.py\n",
       "worker.command", "command: train.py", "expected a list: the program"},
      {"worker command empty program", good + "worker:\n  command: [\"\", x]\n",
       "worker.command[0]", "command: [",
       "expected the program's path or name"},
      {"worker command argument not a string",
       good + "worker:\n  command: [python3, [a]]\n", "worker.command[1]",
       "command: [", "expected a string"},
      {"replication factor out of range", good + "replication:\n  factor: 3\n",
       "replication.factor", "factor: 3",
       "must be 1 (no replicas) or 2 (a backup per shard)"},
      {"replicas without their addresses", good + "replication:\n  factor: 2\n",
       "replication.backups", "factor: 2",
       "expected a list of 2 \"host:port\" addresses"},
      {"a backup address short",
       good + "replication:\n  factor: 2\n  backups: [\"127.0.0.1:0\"]\n",
       "replication.backups", "backups:", "expected a list of 2"},
      {"a backup address without a port",
       good + "replication:\n  factor: 2\n  backups: [\"127.0.0.1:0\", "
              "nohost]\n",
       "replication.backups[1]", "backups:", "host:port"},
      {"a backup address twice",
       good + "replication:\n  factor: 2\n  backups: [\"127.0.0.1:5\", "
              "\"127.0.0.1:5\"]\n",
       "replication.backups[1]", "backups:", "listed twice"},
      {"backups without replicas",
       good + "replication:\n  backups: [\"127.0.0.1:5\", "
              "\"127.0.0.1:6\"]\n",
       "replication.backups",
       "backups:", "does not apply: replication.factor is 1"},
      {"bad chunk size",
       absl::StrReplaceAll(good, {{"chunk_bytes: 16384", "chunk_bytes: 6"}}),
       "partition.chunk_bytes", "chunk_bytes: 6", "multiple of 4"},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      std::string path;
      const std::string error = JobYamlError(c.yaml, &path);
      INFO("error: " << error);
      const std::string prefix = absl::StrCat(
          path, ":", LineOf(c.yaml, c.line_of), ": ", c.field, ": ");
      CHECK(error.rfind(prefix, 0) == 0);
      CHECK(error.find(c.message) != std::string::npos);
      CHECK(error.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("the replication section gives each shard a backup", "[config]") {
  const std::string dir = NewTempDir();
  const std::string path = WriteFile(
      dir + "/job.yaml",
      JobYaml(JobOptions{}) +
          "replication:\n  factor: 2\n  backups: [\"10.0.0.2:47320\", "
          "\"10.0.0.1:47321\"]\n");
  absl::StatusOr<JobConfig> c = LoadJobConfig(path);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->replication.enabled());
  CHECK(c->replication.backups ==
        std::vector<std::string>{"10.0.0.2:47320", "10.0.0.1:47321"});
  absl::StatusOr<JobConfig> plain =
      LoadJobConfig(WriteFile(dir + "/plain.yaml", JobYaml(JobOptions{})));
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->replication.enabled());
  CHECK(plain->replication.backups.empty());
}

TEST_CASE("the coordination section names etcd and a lease; bad ones named",
          "[config][coord]") {
  const std::string good = JobYaml(JobOptions{});
  const std::string dir = NewTempDir();
  absl::StatusOr<JobConfig> c = LoadJobConfig(WriteFile(
      dir + "/job.yaml", good +
                             "coordination:\n  etcd: [\"10.0.0.5:2379\", "
                             "\"unix:/run/etcd.sock\"]\n  lease_seconds: 4\n"));
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->coordination.enabled());
  CHECK(c->coordination.etcd ==
        std::vector<std::string>{"10.0.0.5:2379", "unix:/run/etcd.sock"});
  CHECK(c->coordination.lease_seconds == 4);
  absl::StatusOr<JobConfig> defaults = LoadJobConfig(WriteFile(
      dir + "/defaults.yaml", good + "coordination:\n  etcd: [\"h:2379\"]\n"));
  REQUIRE(defaults.ok());
  CHECK(defaults->coordination.lease_seconds == 10);
  absl::StatusOr<JobConfig> none =
      LoadJobConfig(WriteFile(dir + "/none.yaml", good));
  REQUIRE(none.ok());
  CHECK_FALSE(none->coordination.enabled());
  // Servers found in etcd: N placeholders to listen on; a coordinator is
  // needed, and replicas are not supported with them yet.
  std::string found = good + "coordination:\n  etcd: [\"h:2379\"]\n";
  const std::string listed = "servers: [\"127.0.0.1:0\", \"127.0.0.1:0\"]";
  REQUIRE(found.find(listed) != std::string::npos);
  found.replace(found.find(listed), listed.size(), "servers: {etcd: 3}");
  absl::StatusOr<JobConfig> from_etcd =
      LoadJobConfig(WriteFile(dir + "/found.yaml", found));
  INFO(from_etcd.status().ToString());
  REQUIRE(from_etcd.ok());
  CHECK(from_etcd->servers_from_etcd);
  CHECK(from_etcd->servers == std::vector<std::string>(3, "0.0.0.0:0"));
  const std::string uncoordinated =
      found.substr(0, found.find("coordination:"));
  CHECK(
      JobYamlError(uncoordinated)
          .find(": cluster.servers: {etcd: N} needs a coordination section") !=
      std::string::npos);
  CHECK(JobYamlError(found + "replication:\n  factor: 2\n")
            .find(": replication.factor: 2 is not supported yet with "
                  "cluster.servers {etcd: N}") != std::string::npos);
  CHECK(JobYamlError(absl::StrReplaceAll(found, {{"{etcd: 3}", "{etcd: 0}"}}))
            .find(": cluster.servers.etcd: must be between 1 and 1024") !=
        std::string::npos);
  // TLS to etcd: paths resolve against the job file's folder.
  absl::StatusOr<JobConfig> tls = LoadJobConfig(WriteFile(
      dir + "/tls.yaml", good + "coordination:\n  etcd: [\"h:2379\"]\n"
                                "  tls_ca: pki/ca.pem\n  tls_cert: /pki/c.pem\n"
                                "  tls_key: /pki/c.key\n"
                                "  tls_server_name: etcd.internal\n"));
  INFO(tls.status().ToString());
  REQUIRE(tls.ok());
  CHECK(tls->coordination.tls());
  CHECK(tls->coordination.tls_ca == dir + "/pki/ca.pem");
  CHECK(tls->coordination.tls_cert == "/pki/c.pem");
  CHECK(tls->coordination.tls_key == "/pki/c.key");
  CHECK(tls->coordination.tls_server_name == "etcd.internal");
  CHECK_FALSE(defaults->coordination.tls());

  struct Case {
    std::string section;
    std::string field;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"coordination:\n  lease_seconds: 5\n", "coordination.etcd",
       "expected a non-empty list of etcd client endpoints"},
      {"coordination:\n  etcd: []\n", "coordination.etcd",
       "expected a non-empty list"},
      {"coordination:\n  etcd: \"h:2379\"\n", "coordination.etcd",
       "expected a non-empty list"},
      {"coordination:\n  etcd: [\"h:2379\", \"h\"]\n", "coordination.etcd[1]",
       "h"},
      {"coordination:\n  etcd: [\"h:0\"]\n", "coordination.etcd[0]",
       "needs its port"},
      {"coordination:\n  etcd: [\"unix:\"]\n", "coordination.etcd[0]",
       "names no socket"},
      {"coordination:\n  etcd: [[1]]\n", "coordination.etcd[0]",
       "expected \"host:port\""},
      {"coordination:\n  etcd: [\"h:2379\"]\n  lease_seconds: 1\n",
       "coordination.lease_seconds", "between 2"},
      {"coordination:\n  etcd: [\"h:2379\"]\n  lease_seconds: 601\n",
       "coordination.lease_seconds", "and 600"},
      {"coordination:\n  etcd: [\"h:2379\"]\n  leases: 3\n",
       "coordination.leases", "unknown"},
      {"coordination:\n  etcd: [\"h:2379\"]\n  tls_cert: c.pem\n"
       "  tls_key: c.key\n",
       "coordination.tls_cert", "only applies with coordination.tls_ca"},
      {"coordination:\n  etcd: [\"h:2379\"]\n  tls_ca: ca.pem\n"
       "  tls_cert: c.pem\n",
       "coordination.tls_key", "tls_cert and tls_key come together"},
  };
  for (const Case& k : cases) {
    INFO(k.section);
    const std::string error = JobYamlError(good + k.section);
    INFO("error: " << error);
    CHECK(error.find(": " + k.field + ": ") != std::string::npos);
    CHECK(error.find(k.message) != std::string::npos);
  }
}

TEST_CASE("the security section resolves its paths and fills defaults",
          "[config]") {
  const std::string dir = NewTempDir();
  const std::string path = WriteFile(
      dir + "/job.yaml",
      JobYaml(JobOptions{}) +
          "security:\n  token_file: secrets/token\n  tls_cert: s.crt\n"
          "  tls_key: /keys/s.key\n  mutual_tls: true\n");
  absl::StatusOr<JobConfig> c = LoadJobConfig(path);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->security.token_file == dir + "/secrets/token");
  CHECK(c->security.tls_cert == dir + "/s.crt");
  CHECK(c->security.tls_key == "/keys/s.key");
  CHECK(c->security.tls_ca == dir + "/s.crt");  // self-signed
  CHECK(c->security.tls_client_cert == dir + "/s.crt");
  CHECK(c->security.tls_client_key == "/keys/s.key");
  CHECK(c->security.tls());
  absl::StatusOr<JobConfig> plain =
      LoadJobConfig(WriteFile(dir + "/plain.yaml", JobYaml(JobOptions{})));
  REQUIRE(plain.ok());
  CHECK_FALSE(plain->security.tls());
  CHECK(plain->security.token_file.empty());
}

TEST_CASE("policies, liveness and testing aids parse", "[config]") {
  const std::string good = JobYaml(JobOptions{});
  JobOptions o;
  o.policy = "ssp";
  o.staleness = 3;
  o.lease_seconds = 4;
  o.heartbeat_seconds = 0.5;
  o.stall_warn_seconds = 2;
  const std::string yaml =
      absl::StrReplaceAll(JobYaml(o), {{"heartbeat_seconds: 0.5",
                                        "heartbeat_seconds: 0.5\n  "
                                        "keepalive_seconds: 5"}}) +
      "testing:\n  slow_rank: 1\n  slow_step_ms: 20\n" +
      "worker:\n  shared_memory: off\n";
  const std::string path = WriteFile(NewTempDir() + "/job.yaml", yaml);
  absl::StatusOr<JobConfig> c = LoadJobConfig(path);
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->policy.type == PolicyType::kSsp);
  CHECK(c->policy.staleness == 3);
  CHECK(c->liveness.lease_seconds == 4);
  CHECK(c->liveness.heartbeat_seconds == 0.5);
  CHECK(c->liveness.stall_warn_seconds == 2);
  CHECK(c->liveness.keepalive_seconds == 5);
  CHECK(c->testing.slow_rank == 1);
  CHECK(c->testing.slow_step_ms == 20);
  CHECK_FALSE(c->worker.shared_memory);

  const std::string async =
      WriteFile(NewTempDir() + "/job.yaml",
                absl::StrReplaceAll(good, {{"type: sync", "type: async"}}));
  absl::StatusOr<JobConfig> a = LoadJobConfig(async);
  REQUIRE(a.ok());
  CHECK(a->policy.type == PolicyType::kAsync);
  CHECK(a->policy.staleness_scaling == StalenessScaling::kNone);
  CHECK(a->liveness.lease_seconds == 10);  // defaults
  CHECK(a->testing.slow_rank == -1);

  // The guards: clip_norm under any optimizer; `guard` on with defaults.
  const std::string guarded = WriteFile(
      NewTempDir() + "/job.yaml",
      absl::StrReplaceAll(good, {{"learning_rate: 0.05",
                                  "learning_rate: 0.05\n  clip_norm: 5"}}) +
          "guard:\n  on_diverge: stop\n");
  absl::StatusOr<JobConfig> g = LoadJobConfig(guarded);
  INFO(g.status().ToString());
  REQUIRE(g.ok());
  CHECK(g->optimizer.clip_norm == 5);
  CHECK(g->guard.enabled);
  CHECK(g->guard.loss_spike == 10);
  CHECK(g->guard.warmup_pushes == 20);
  CHECK(g->guard.on_diverge == OnDiverge::kStop);
  CHECK_FALSE(a->guard.enabled);
  CHECK(a->optimizer.clip_norm == 0);
  // Tracing: the folder beside the job file, the window.
  const std::string traced_dir = NewTempDir();
  absl::StatusOr<JobConfig> t = LoadJobConfig(
      WriteFile(traced_dir + "/job.yaml",
                good + "tracing:\n  dir: trace\n  from_step: 7\n  steps: 2\n"));
  REQUIRE(t.ok());
  CHECK(t->tracing.dir == traced_dir + "/trace");
  CHECK(t->tracing.from_step == 7);
  CHECK(t->tracing.steps == 2);
  CHECK_FALSE(a->tracing.on());
  // The stall time's older name.
  const std::string older = WriteFile(
      NewTempDir() + "/job.yaml",
      absl::StrReplaceAll(
          good, {{"stall_warn_seconds: 30", "warn_after_seconds: 7"}}));
  absl::StatusOr<JobConfig> w = LoadJobConfig(older);
  REQUIRE(w.ok());
  CHECK(w->liveness.stall_warn_seconds == 7);

  for (const char* type : {"async", "ssp\n  staleness: 1"}) {
    const std::string scaled = WriteFile(
        NewTempDir() + "/job.yaml",
        absl::StrReplaceAll(
            good, {{"type: sync", absl::StrCat("type: ", type,
                                               "\n  staleness_scaling: "
                                               "inverse")}}));
    absl::StatusOr<JobConfig> i = LoadJobConfig(scaled);
    INFO(type << ": " << i.status().ToString());
    REQUIRE(i.ok());
    CHECK(i->policy.staleness_scaling == StalenessScaling::kInverse);
  }
}

TEST_CASE("optimizers and schedules parse with their defaults", "[config]") {
  const std::string good = JobYaml(JobOptions{});
  const std::string yaml = absl::StrReplaceAll(
      good, {{"  type: sgd\n  learning_rate: 0.05\n  momentum: 0.9\n",
              "  type: adamw\n  learning_rate: 0.001\n  weight_decay: 0.01\n"
              "  schedule:\n    type: cosine\n    warmup_steps: 100\n"
              "    total_steps: 2000\n"}});
  REQUIRE(yaml != good);
  absl::StatusOr<JobConfig> c =
      LoadJobConfig(WriteFile(NewTempDir() + "/job.yaml", yaml));
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->optimizer.type == "adamw");
  CHECK(c->optimizer.beta1 == 0.9);
  CHECK(c->optimizer.beta2 == 0.999);
  CHECK(c->optimizer.eps == 1e-8);
  CHECK(c->optimizer.weight_decay == 0.01);
  CHECK(c->optimizer.schedule.type == ScheduleType::kCosine);
  CHECK(c->optimizer.schedule.warmup_steps == 100);
  CHECK(c->optimizer.schedule.total_steps == 2000);
  const std::string adagrad = absl::StrReplaceAll(
      good, {{"  type: sgd\n  learning_rate: 0.05\n  momentum: 0.9\n",
              "  type: adagrad\n  learning_rate: 0.01\n"}});
  absl::StatusOr<JobConfig> a =
      LoadJobConfig(WriteFile(NewTempDir() + "/job.yaml", adagrad));
  REQUIRE(a.ok());
  CHECK(a->optimizer.eps == 1e-10);
}

TEST_CASE("syntax errors and missing files are clear", "[config]") {
  std::string path;
  const std::string error = JobYamlError("job:\n  id: [unclosed\n", &path);
  CHECK(error.rfind(path + ":", 0) == 0);
  CHECK(error.find("(syntax)") != std::string::npos);

  absl::StatusOr<JobConfig> missing = LoadJobConfig("/nonexistent/job.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(std::string(missing.status().message()) ==
        "/nonexistent/job.yaml:0: (file): cannot open the job file");

  CHECK(JobYamlError("").find("the job file is empty") != std::string::npos);
}

TEST_CASE("compression and metrics parse", "[config]") {
  testing::JobOptions o;
  const std::string dir = testing::NewTempDir();
  absl::StatusOr<JobConfig> plain =
      LoadJobConfig(testing::WriteFile(dir + "/a.yaml", testing::JobYaml(o)));
  REQUIRE(plain.ok());
  CHECK(plain->compression.type == "none");
  CHECK(plain->metrics.port == 0);
  absl::StatusOr<JobConfig> c = LoadJobConfig(testing::WriteFile(
      dir + "/b.yaml", testing::JobYaml(o) +
                           "compression:\n  type: fp16\n"
                           "metrics:\n  port: 9400\n  bind: 127.0.0.1\n"));
  REQUIRE(c.ok());
  CHECK(c->compression.fp16());
  CHECK(!c->compression.topk());
  CHECK(c->metrics.port == 9400);
  absl::StatusOr<JobConfig> t = LoadJobConfig(testing::WriteFile(
      dir + "/c.yaml", testing::JobYaml(o) +
                           "compression:\n  type: topk\n  ratio: 0.05\n"
                           "  error_feedback: false\n"));
  REQUIRE(t.ok());
  CHECK(t->compression.topk());
  CHECK(t->compression.ratio == 0.05);
  CHECK(!t->compression.error_feedback);
  absl::StatusOr<JobConfig> d = LoadJobConfig(testing::WriteFile(
      dir + "/d.yaml", testing::JobYaml(o) + "compression:\n  type: topk\n"));
  REQUIRE(d.ok());
  CHECK(d->compression.ratio == 0.01);
  CHECK(d->compression.error_feedback);
  CHECK(!d->compression.pull_fp16());
  CHECK(d->compression.momentum == 0);
  absl::StatusOr<JobConfig> m = LoadJobConfig(testing::WriteFile(
      dir + "/m.yaml",
      absl::StrReplaceAll(testing::JobYaml(o), {{"  momentum: 0.9\n", ""}}) +
          "compression:\n  type: topk\n  momentum: 0.9\n"));
  INFO((m.ok() ? "" : m.status().ToString()));
  REQUIRE(m.ok());
  CHECK(m->compression.momentum == Approx(0.9));
  absl::StatusOr<JobConfig> e = LoadJobConfig(testing::WriteFile(
      dir + "/e.yaml",
      testing::JobYaml(o) + "compression:\n  type: fp16\n  pull: fp16\n"));
  REQUIRE(e.ok());
  CHECK(e->compression.pull_fp16());
  CHECK(c->metrics.bind == "127.0.0.1");
  CHECK_FALSE(e->worker.overlap);
  absl::StatusOr<JobConfig> v = LoadJobConfig(testing::WriteFile(
      dir + "/v.yaml", testing::JobYaml(o) + "compression:\n  type: fp16\n"
                                             "worker:\n  overlap: true\n"));
  REQUIRE(v.ok());
  CHECK(v->worker.overlap);
}

TEST_CASE("host:port parsing", "[config]") {
  std::string host;
  int port = -1;
  REQUIRE(ParseHostPort("127.0.0.1:0", &host, &port).ok());
  CHECK(host == "127.0.0.1");
  CHECK(port == 0);
  REQUIRE(ParseHostPort("[::1]:9000", &host, &port).ok());
  CHECK(host == "[::1]");
  CHECK(port == 9000);
  CHECK_FALSE(ParseHostPort("host:70000", &host, &port).ok());
  CHECK_FALSE(ParseHostPort(":80", &host, &port).ok());
  CHECK_FALSE(ParseHostPort("host:", &host, &port).ok());
}

}  // namespace
}  // namespace paramd

namespace paramd {
namespace {

// An embedding_bag job's model section with `table` as its one table.
std::string BagJob(const std::string& table,
                   const std::string& layers = "[8, 10]") {
  testing::JobOptions o;
  o.model_type = "embedding_bag";
  o.layers = layers;
  o.model_extra = "  embeddings:\n" + table;
  return testing::JobYaml(o);
}

TEST_CASE("embedding tables parse with their defaults and bad ones are named",
          "[config]") {
  const std::string dir = testing::NewTempDir();
  absl::StatusOr<JobConfig> c = LoadJobConfig(testing::WriteFile(
      dir + "/a.yaml",
      BagJob("    - name: emb\n      rows: 1099511627776\n      dim: 8\n") +
          ""));
  INFO((c.ok() ? "" : c.status().ToString()));
  REQUIRE(c.ok());
  REQUIRE(c->model.embeddings.size() == 1);
  const EmbeddingTableConfig& t = c->model.embeddings[0];
  CHECK(t.name == "emb");
  CHECK(t.rows == uint64_t{1} << 40);
  CHECK(t.dim == 8);
  CHECK(t.init == "normal");
  CHECK(t.optimizer == "adam");
  CHECK(t.eps == 1e-8);
  CHECK(t.max_rows == 0);
  CHECK(c->model.features.levels == 4);
  CHECK(c->model.features.combiner == "mean");

  absl::StatusOr<JobConfig> g = LoadJobConfig(testing::WriteFile(
      dir + "/g.yaml",
      BagJob("    - name: emb\n      rows: 100\n      dim: 8\n"
             "      optimizer: {type: adagrad, learning_rate: 0.1}\n"
             "      max_rows: 50\n") +
          ""));
  REQUIRE(g.ok());
  CHECK(g->model.embeddings[0].optimizer == "adagrad");
  CHECK(g->model.embeddings[0].eps == 1e-10);
  CHECK(g->model.embeddings[0].max_rows == 50);
  CHECK_FALSE(g->model.embeddings[0].admission.enabled());

  absl::StatusOr<JobConfig> a = LoadJobConfig(testing::WriteFile(
      dir + "/admission.yaml",
      BagJob("    - name: emb\n      rows: 100\n      dim: 8\n"
             "      admission: {min_count: 3, sketch_mib: 2}\n")));
  INFO((a.ok() ? "" : a.status().ToString()));
  REQUIRE(a.ok());
  CHECK(a->model.embeddings[0].admission.min_count == 3);
  CHECK(a->model.embeddings[0].admission.sketch_mib == 2);
  CHECK(a->model.embeddings[0].admission.enabled());
  CHECK_FALSE(a->model.embeddings[0].eviction.enabled());
  CHECK_FALSE(a->model.embeddings[0].storage.enabled());

  // storage.dir resolves against the job file's folder.
  absl::StatusOr<JobConfig> s = LoadJobConfig(testing::WriteFile(
      dir + "/storage.yaml",
      BagJob("    - name: emb\n      rows: 100\n      dim: 8\n"
             "      storage: {memory_bytes: 1073741824, dir: rows}\n")));
  INFO((s.ok() ? "" : s.status().ToString()));
  REQUIRE(s.ok());
  CHECK(s->model.embeddings[0].storage.enabled());
  CHECK(s->model.embeddings[0].storage.memory_bytes == uint64_t{1} << 30);
  CHECK(s->model.embeddings[0].storage.dir == dir + "/rows");

  absl::StatusOr<JobConfig> e = LoadJobConfig(testing::WriteFile(
      dir + "/eviction.yaml",
      BagJob("    - name: emb\n      rows: 100\n      dim: 8\n"
             "      eviction: {ttl_steps: 500, capacity_rows: 40, "
             "policy: lfu}\n")));
  INFO((e.ok() ? "" : e.status().ToString()));
  REQUIRE(e.ok());
  const EvictionConfig& ev = e->model.embeddings[0].eviction;
  CHECK(ev.ttl_steps == 500);
  CHECK(ev.capacity_rows == 40);
  CHECK(ev.lfu);
  CHECK(ev.enabled());

  const std::string good_table =
      "    - name: emb\n      rows: 100\n      dim: 8\n";
  struct Case {
    std::string yaml;
    std::string says;
  };
  const std::vector<Case> cases = {
      {BagJob("    - name: emb\n      rows: 1099511627777\n      dim: 8\n"),
       "model.embeddings[0].rows: must be in [1, 2^40]"},
      {BagJob("    - name: emb\n      rows: 100\n      dim: 0\n"),
       "model.embeddings[0].dim: must be in [1, 4096]"},
      {BagJob("    - name: emb\n      dim: 8\n"), "model.embeddings[0].rows"},
      {BagJob(good_table + "      init: xavier\n"),
       "model.embeddings[0].init: unknown initialiser 'xavier'"},
      {BagJob(good_table + "      optimizer: {type: rmsprop}\n"),
       "model.embeddings[0].optimizer.type: unknown table optimizer"},
      {BagJob(good_table + "      optimizer: {type: sgd, beta1: 0.5}\n"),
       "model.embeddings[0].optimizer.beta1: does not apply"},
      {BagJob(good_table + "      admission: {min_count: 1}\n"),
       "model.embeddings[0].admission.min_count: must be in [2, 255]"},
      {BagJob(good_table + "      admission: {probability: 1.5}\n"),
       "model.embeddings[0].admission.probability: must be in (0, 1)"},
      {BagJob(good_table +
              "      admission: {min_count: 2, probability: 0.5}\n"),
       "model.embeddings[0].admission: give one of min_count or probability"},
      {BagJob(good_table + "      admission: {}\n"),
       "model.embeddings[0].admission: give one of min_count or probability"},
      {BagJob(good_table +
              "      admission: {probability: 0.5, sketch_mib: 4}\n"),
       "model.embeddings[0].admission.sketch_mib: applies to min_count only"},
      {BagJob(good_table + "      admission: {min_count: 2, ttl: 3}\n"),
       "model.embeddings[0].admission"},
      {BagJob(good_table + "      eviction: {}\n"),
       "model.embeddings[0].eviction: give ttl_steps, capacity_rows or both"},
      {BagJob(good_table + "      eviction: {ttl_steps: 0}\n"),
       "model.embeddings[0].eviction.ttl_steps: must be >= 1"},
      {BagJob(good_table + "      eviction: {capacity_rows: 0}\n"),
       "model.embeddings[0].eviction.capacity_rows: must be in [1, 2^32 - 1)"},
      {BagJob(good_table + "      eviction: {ttl_steps: 9, policy: lru}\n"),
       "model.embeddings[0].eviction.policy: applies to capacity_rows only"},
      {BagJob(good_table +
              "      eviction: {capacity_rows: 9, policy: fifo}\n"),
       "model.embeddings[0].eviction.policy: unknown policy 'fifo'"},
      {BagJob(good_table + "      eviction: {ttl: 9}\n"),
       "model.embeddings[0].eviction"},
      {BagJob(good_table + "      storage: {memory_bytes: 1048576}\n"),
       "model.embeddings[0].storage.dir"},
      {BagJob(good_table + "      storage: {memory_bytes: 4096, dir: d}\n"),
       "model.embeddings[0].storage.memory_bytes: must be in [65536, 2^50]"},
      {BagJob(good_table + "      storage: {dir: d}\n"),
       "model.embeddings[0].storage.memory_bytes"},
      {BagJob(good_table +
              "      storage: {memory_bytes: 1048576, dir: d, ssd: 1}\n"),
       "model.embeddings[0].storage"},
      {BagJob(good_table + "      eviction: {ttl_steps: 5}\n" +
              "      storage: {memory_bytes: 1048576, dir: d}\n"),
       "model.embeddings[0].eviction: does not apply beside storage"},
      {BagJob(good_table + "      max_rows: 50\n" +
              "      storage: {memory_bytes: 1048576, dir: d}\n"),
       "model.embeddings[0].max_rows: does not apply beside storage"},
      {BagJob(good_table + "      storage: {memory_bytes: 1048576, dir: d}\n") +
           "replication:\n  factor: 2\n  backups: [\"127.0.0.1:0\", "
           "\"127.0.0.1:1\"]\n",
       "replication.factor: does not apply to a job whose table "
       "model.embeddings[0] has storage"},
      {BagJob(good_table +
              "      max_rows: 50\n      eviction: {capacity_rows: 50}\n"),
       "model.embeddings[0].eviction.capacity_rows: must be below max_rows"},
      {BagJob(good_table, "[16, 10]"),
       "model.layers[0]: an embedding_bag model's first width must be its "
       "table's dim, 8"},
      {BagJob(good_table + good_table),
       "model.embeddings: expected a list of exactly one table"},
      {BagJob(good_table) + "", ""},
      {absl::StrReplaceAll(BagJob(good_table),
                           {{"type: embedding_bag", "type: mlp"}}),
       "model.embeddings: applies to embedding models only"},
      {BagJob(good_table) + "worker:\n  overlap: true\n",
       "worker.overlap: not with model.embeddings"},
  };
  for (const Case& k : cases) {
    if (k.says.empty()) continue;
    const std::string error = JobYamlError(k.yaml);
    INFO(k.yaml);
    CHECK_THAT(error, Catch::Contains(k.says));
  }
}

TEST_CASE("a table's policy: async, or the job's; others are named",
          "[config][table_policy]") {
  const std::string table = "    - name: emb\n      rows: 100\n      dim: 8\n";
  auto job = [&table](const std::string& job_policy, const std::string& own) {
    testing::JobOptions o;
    o.model_type = "embedding_bag";
    o.layers = "[8, 10]";
    o.policy = job_policy;
    o.model_extra = "  embeddings:\n" + table +
                    (own.empty() ? "" : "      policy: " + own + "\n");
    return testing::JobYaml(o);
  };
  const std::string dir = testing::NewTempDir();
  struct Good {
    const char* job;
    const char* own;
    bool async;
  };
  for (const Good& g : std::vector<Good>{{"sync", "", false},
                                         {"sync", "sync", false},
                                         {"sync", "async", true},
                                         {"ssp", "async", true},
                                         {"ssp", "ssp", false},
                                         {"async", "async", true}}) {
    INFO(g.job << " " << g.own);
    absl::StatusOr<JobConfig> c =
        LoadJobConfig(testing::WriteFile(dir + "/job.yaml", job(g.job, g.own)));
    INFO((c.ok() ? "" : c.status().ToString()));
    REQUIRE(c.ok());
    CHECK(c->model.embeddings[0].async() == g.async);
  }
  struct Bad {
    const char* job;
    const char* own;
    const char* says;
  };
  for (const Bad& b : std::vector<Bad>{
           {"sync", "ssp",
            "model.embeddings[0].policy: a table may be async or follow the "
            "job's policy.type (sync); 'ssp'"},
           {"async", "sync",
            "model.embeddings[0].policy: a table may be async or follow the "
            "job's policy.type (async); 'sync'"},
           {"ssp", "sync", "model.embeddings[0].policy"},
           {"sync", "bsp",
            "model.embeddings[0].policy: unknown policy 'bsp' (expected: "
            "async, or the job's policy.type)"}}) {
    INFO(b.job << " " << b.own);
    CHECK_THAT(JobYamlError(job(b.job, b.own)), Catch::Contains(b.says));
  }
}

TEST_CASE("data.format clicks reads click logs into an embedding model",
          "[config][clicks]") {
  const std::string dir = testing::NewTempDir();
  testing::WriteFile(dir + "/train.tsv", "1\ta\tb\n0\tc\td\n");
  testing::WriteFile(dir + "/test.tsv", "0\ta\td\n");
  JobOptions o = ClickJob(
      "  format: clicks\n  train_file: train.tsv\n  test_file: test.tsv\n");
  std::string path;
  const std::string yaml = JobYaml(o);
  REQUIRE(testing::WriteFile(dir + "/job.yaml", yaml) == dir + "/job.yaml");
  absl::StatusOr<JobConfig> c = LoadJobConfig(dir + "/job.yaml");
  INFO(c.status().ToString());
  REQUIRE(c.ok());
  CHECK(c->data.format == DataFormat::kClicks);
  CHECK(c->data.train_file == dir + "/train.tsv");  // Against the job's folder.
  CHECK(c->data.test_file == dir + "/test.tsv");
  CHECK(c->model.type == ModelType::kEmbeddingConcat);
  CHECK_FALSE(c->training.shuffle);
  // Without the shuffle key: file order all the same.
  JobOptions unshuffled = o;
  unshuffled.shuffle = true;
  const std::string no_key =
      absl::StrReplaceAll(JobYaml(unshuffled), {{"\n  shuffle: true", ""}});
  testing::WriteFile(dir + "/no_key.yaml", no_key);
  c = LoadJobConfig(dir + "/no_key.yaml");
  REQUIRE(c.ok());
  CHECK_FALSE(c->training.shuffle);

  struct Case {
    std::string from, to, says;
  };
  const Case cases[] = {
      {"format: clicks", "format: csv",
       "data.format: unknown format 'csv' (expected: idx or clicks)"},
      {"train_file: train.tsv", "train_file: missing.tsv",
       "data.train_file: cannot read '" + dir + "/missing.tsv'"},
      {"  train_file: train.tsv\n", "", "data.train_file: missing"},
      {"  test_file: test.tsv\n", "  test_file: test.tsv\n  dir: /tmp\n",
       "data.dir: applies to data.format idx (images), not clicks"},
      {"  test_file: test.tsv\n",
       "  test_file: test.tsv\n  augment: {flip: true}\n",
       "data.augment: applies to data.format idx"},
      {"shuffle: false", "shuffle: true",
       "training.shuffle: a click log is read in file order"},
      {"  format: clicks\n", "",
       "data.train_file: applies to data.format clicks"},
      {"embedding_concat: {table: clicks, fields: 2}",
       "embedding_bag: {table: clicks}",
       "model.layers[0].embedding_bag.fields: a click log's bag needs the "
       "tokens per line (fields)"},
  };
  for (const Case& k : cases) {
    std::string bad = absl::StrReplaceAll(yaml, {{k.from, k.to}});
    bad = absl::StrReplaceAll(
        bad, {{"type: embedding_concat\n",
               k.from.find("embedding_concat") != std::string::npos
                   ? "type: embedding_bag\n"
                   : "type: embedding_concat\n"}});
    REQUIRE(bad != yaml);
    testing::WriteFile(dir + "/bad.yaml", bad);
    absl::StatusOr<JobConfig> b = LoadJobConfig(dir + "/bad.yaml");
    INFO(bad);
    REQUIRE_FALSE(b.ok());
    CHECK_THAT(std::string(b.status().message()), Catch::Contains(k.says));
  }
  // A dense model cannot read ids.
  JobOptions mlp;
  mlp.data = o.data;
  mlp.shuffle = false;
  testing::WriteFile(dir + "/mlp.yaml", JobYaml(mlp));
  CHECK_THAT(std::string(LoadJobConfig(dir + "/mlp.yaml").status().message()),
             Catch::Contains("data.format: a click log's samples are ids: its "
                             "model starts with an embedding_bag or "
                             "embedding_concat layer"));
}

}  // namespace
}  // namespace paramd
