// paramctl end to end, with the real binaries as child processes: bad job
// files fail with one line and start nothing; a small job runs to its
// summary; a failing worker and Ctrl-C stop every process; export writes
// a model paramd-serve serves.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/local_cluster.h"
#include "tests/paramctl_runs.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using testing::JobOptions;
using testing::JobYaml;
using testing::NewTempDir;
using testing::ProcessGone;
using testing::ReadFileOrEmpty;
using testing::RunCommand;
using testing::StartedPids;
using testing::Subprocess;
using testing::WriteFile;

const std::string kParamctl = "tools/paramctl";

std::vector<std::string> RunArgs(const std::string& job,
                                 std::vector<std::string> extra = {}) {
  return testing::ParamctlRunArgs(job, std::move(extra));
}

TEST_CASE("validate accepts the main job", "[paramctl]") {
  std::string out;
  CHECK(RunCommand({kParamctl, "validate", "configs/fashion_mnist_mlp.yaml"},
                   &out) == 0);
  CHECK(out.find("configs/fashion_mnist_mlp.yaml: ok") != std::string::npos);
  CHECK(out.find("235146 parameters") != std::string::npos);
}

TEST_CASE("validate names an embedding job's model and table", "[paramctl]") {
  std::string out;
  CHECK(RunCommand({kParamctl, "validate", "configs/fashion_mnist_hashed.yaml"},
                   &out) == 0);
  CHECK(out.find("model embedding_bag embedding_bag(table 0, dim 32, mean) "
                 "32-64-10") != std::string::npos);
  CHECK(out.find("table 'pixels': 1048576 rows x 32, adam") !=
        std::string::npos);
}

TEST_CASE(
    "each bad job file exits non-zero with one line naming file, line "
    "and field, and starts nothing",
    "[paramctl]") {
  const std::string good = JobYaml(JobOptions{});
  const std::vector<std::pair<std::string, std::string>> bad = {
      {absl::StrReplaceAll(good, {{"  workers: 2\n", ""}}), "cluster.workers"},
      {absl::StrReplaceAll(good, {{"batch_size: 32", "batch_size: big"}}),
       "training.batch_size"},
      {absl::StrReplaceAll(good, {{"type: sync", "type: gossip"}}),
       "policy.type"},
      {good + "extra_key: 1\n", "extra_key"},
      {absl::StrReplaceAll(good,
                           {{std::string("dir: ") + testing::kFashionMnistDir,
                             "dir: /no/such/folder"}}),
       "data.train_images"},
  };
  for (const auto& [yaml, field] : bad) {
    const std::string path = WriteFile(NewTempDir() + "/bad.yaml", yaml);
    for (const std::string command : {"run", "validate"}) {
      std::string out;
      const int code = command == std::string("run")
                           ? RunCommand(RunArgs(path), &out)
                           : RunCommand({kParamctl, "validate", path}, &out);
      INFO(command << " " << field << ": " << out);
      CHECK(code == 1);
      const std::vector<std::string> lines =
          absl::StrSplit(out, '\n', absl::SkipEmpty());
      REQUIRE(lines.size() == 1);
      CHECK(std::regex_search(
          lines[0],
          std::regex("^paramctl: " + path + ":[0-9]+: " +
                     std::regex_replace(field, std::regex(R"(\.)"), R"(\.)") +
                     ": ")));
      CHECK(StartedPids(out).empty());
    }
  }
}

TEST_CASE("run trains a small job and writes the summary", "[paramctl][e2e]") {
  const std::string dir = NewTempDir();
  JobOptions o;
  o.epochs = 2;
  o.train_limit = 2048;
  o.test_limit = 500;
  const std::string job = WriteFile(dir + "/job.yaml", JobYaml(o));
  const std::string summary = dir + "/summary.json";
  std::string out;
  const int code = RunCommand(RunArgs(job, {"--summary", summary}), &out);
  INFO(out);
  REQUIRE(code == 0);
  CHECK(out.find("[server 0]") != std::string::npos);
  CHECK(out.find("[worker 1]") != std::string::npos);
  CHECK(out.find("paramctl: epoch 1/2") != std::string::npos);
  CHECK(out.find("paramctl: epoch 2/2") != std::string::npos);
  const std::vector<pid_t> pids = StartedPids(out);
  CHECK(pids.size() == 4);
  for (pid_t pid : pids) CHECK(ProcessGone(pid));

  const std::string json = ReadFileOrEmpty(summary);
  INFO(json);
  CHECK(json.find("\"policy\": \"sync\"") != std::string::npos);
  CHECK(json.find("\"servers\": 2") != std::string::npos);
  CHECK(json.find("\"workers\": 2") != std::string::npos);
  CHECK(json.find("\"epochs\": 2") != std::string::npos);
  std::smatch m;
  REQUIRE(std::regex_search(json, m,
                            std::regex(R"("final_test_accuracy": ([0-9.]+))")));
  CHECK(std::stod(m[1]) > 0.5);
  REQUIRE(
      std::regex_search(json, m, std::regex(R"("wall_seconds": ([0-9.]+))")));
  CHECK(std::stod(m[1]) > 0);
  REQUIRE(std::regex_search(json, m,
                            std::regex(R"("samples_per_second": ([0-9.]+))")));
  CHECK(std::stod(m[1]) > 0);
  // Every parameter of [784, 64, 10] travels as float32 each step.
  const std::string step_bytes =
      std::to_string((784 * 64 + 64 + 64 * 10 + 10) * 4);
  CHECK(json.find("\"push_bytes_per_step\": " + step_bytes + ",") !=
        std::string::npos);
  CHECK(json.find("\"push_float32_bytes_per_step\": " + step_bytes + ",") !=
        std::string::npos);
}

TEST_CASE("a failing worker is named with its reason and everything stops",
          "[paramctl][e2e]") {
  // The label file is readable (validation passes) but truncated: the
  // workers fail while loading it.
  const std::string dir = NewTempDir();
  REQUIRE(system(absl::StrCat("cp ", testing::kFashionMnistDir, "/* ", dir)
                     .c_str()) == 0);
  testing::WriteIdx(dir + "/train-labels-idx1-ubyte.gz", {60000},
                    std::vector<uint8_t>(100, 1), true);
  const std::string yaml = absl::StrReplaceAll(
      JobYaml(JobOptions{}),
      {{std::string("dir: ") + testing::kFashionMnistDir, "dir: " + dir}});
  const std::string job = WriteFile(dir + "/job.yaml", yaml);
  std::string out;
  const int code = RunCommand(RunArgs(job), &out);
  INFO(out);
  CHECK(code == 1);
  CHECK(std::regex_search(
      out,
      std::regex(
          R"(paramctl: FAILED: worker [01] \(pid \d+\) exited with status 1; its last line: .*train-labels-idx1-ubyte\.gz: truncated)")));
  const std::vector<pid_t> pids = StartedPids(out);
  CHECK(pids.size() >= 3);
  for (pid_t pid : pids) CHECK(ProcessGone(pid));
}

TEST_CASE("Ctrl-C stops every process and exits 130", "[paramctl][e2e]") {
  JobOptions o;
  o.epochs = 50;  // long enough to be interrupted
  o.train_limit = 0;
  const std::string job = WriteFile(NewTempDir() + "/job.yaml", JobYaml(o));
  Subprocess run(RunArgs(job));
  REQUIRE(run.ReadUntil("started worker 1", absl::Seconds(30)));
  run.Signal(SIGINT);
  const int code = run.Wait(absl::Seconds(30));
  INFO(run.output());
  CHECK(code == 130);
  CHECK(run.output().find("paramctl: interrupted by Interrupt") !=
        std::string::npos);
  const std::vector<pid_t> pids = StartedPids(run.output());
  CHECK(pids.size() == 4);
  for (pid_t pid : pids) CHECK(ProcessGone(pid));
}

TEST_CASE("status prints every server, and says which is down", "[paramctl]") {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  const JobConfig config = testing::MakeJob(o, NewTempDir());
  testing::LocalCluster cluster(config);
  const std::string job = config.path;
  std::string out;
  CHECK(RunCommand({kParamctl, "status", "--job", job, "--servers",
                    cluster.addresses()[0]},
                   &out) == 0);
  INFO(out);
  CHECK(out.find("job test-job   policy sync") != std::string::npos);
  CHECK(out.find(cluster.addresses()[0]) != std::string::npos);
  CHECK(out.find("RANK") != std::string::npos);

  CHECK(RunCommand({kParamctl, "status", "--job", job, "--servers",
                    cluster.addresses()[0], "--json"},
                   &out) == 0);
  CHECK(out.find("\"ok\": true") != std::string::npos);
  CHECK(out.find("\"policy\":\"sync\"") != std::string::npos);

  // Port 1 on loopback has no server.
  CHECK(RunCommand({kParamctl, "status", "--job", job, "--servers",
                    cluster.addresses()[0] + ",127.0.0.1:1"},
                   &out) == 1);
  CHECK(out.find("DOWN") != std::string::npos);
}

TEST_CASE("export writes the model, whole then its changes, and paramd-serve "
          "serves it until SIGTERM",
          "[paramctl][export]") {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  const JobConfig config = testing::MakeJob(o, NewTempDir());
  testing::LocalCluster cluster(config);
  const std::string dir = NewTempDir() + "/exports";
  const std::vector<std::string> export_args = {
      kParamctl, "export", "--job", config.path, "--servers",
      cluster.addresses()[0], "--out", dir};
  std::string out;
  CHECK(RunCommand(export_args, &out) == 0);
  INFO(out);
  CHECK(out.find("export 1 (whole): 0 rows, 0 dropped ids, 50890 tensor "
                 "values; shard versions 0; " +
                 dir + "/export-000001.manifest") != std::string::npos);
  std::vector<std::string> since = export_args;
  since.insert(since.end(), {"--since", "newest"});
  CHECK(RunCommand(since, &out) == 0);
  CHECK(out.find("export 2 (changes since export 1)") != std::string::npos);
  since.back() = "7";
  CHECK(RunCommand(since, &out) == 1);
  CHECK(out.find("holds no export 7") != std::string::npos);
  since.back() = "seven";
  CHECK(RunCommand(since, &out) == 2);
  CHECK(out.find("--since takes an export's sequence") != std::string::npos);

  Subprocess serve({"tools/paramd-serve", "--model", dir});
  REQUIRE(serve.ReadUntil("listening on port", absl::Seconds(60)));
  CHECK(serve.output().find("paramd-serve: export 2 of " + dir) !=
        std::string::npos);
  serve.Signal(SIGTERM);
  CHECK(serve.Wait(absl::Seconds(60)) == 0);
  CHECK(serve.output().find("paramd-serve: stopping") != std::string::npos);
}

}  // namespace
}  // namespace paramd
