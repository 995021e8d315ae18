// The command line paramctl starts a worker rank with: paramd-worker's
// flags, or the job's worker.command in the job's folder with the rank,
// job, servers and launch in its environment.
#include "tools/ctl/worker_command.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

namespace paramd {
namespace {

WorkerLaunch Launch() {
  WorkerLaunch w;
  w.job_path = "/jobs/torch/job.yaml";
  w.rank = 1;
  w.servers = {"127.0.0.1:5000", "127.0.0.1:5001"};
  w.launch = "abc123";
  w.log_level = "warn";
  w.worker_binary = "/opt/paramd/paramd-worker";
  w.python_path = "/opt/paramd/python";
  return w;
}

TEST_CASE("without worker.command a rank runs paramd-worker", "[paramctl]") {
  JobConfig config;
  CHECK(WorkerArgv(config, Launch()) ==
        std::vector<std::string>{"/opt/paramd/paramd-worker", "--job",
                                 "/jobs/torch/job.yaml", "--rank", "1",
                                 "--servers", "127.0.0.1:5000,127.0.0.1:5001",
                                 "--launch", "abc123", "--log_level", "warn"});
}

TEST_CASE(
    "worker.command runs in the job's folder with the rank in its "
    "environment",
    "[paramctl]") {
  JobConfig config;
  config.worker.command = {"/usr/bin/python3", "train.py", "--fast"};
  unsetenv("PYTHONPATH");
  CHECK(WorkerArgv(config, Launch()) ==
        std::vector<std::string>{
            "/usr/bin/env", "-C", "/jobs/torch",
            "PARAMD_JOB=/jobs/torch/job.yaml", "PARAMD_RANK=1",
            "PARAMD_SERVERS=127.0.0.1:5000,127.0.0.1:5001",
            "PARAMD_LAUNCH=abc123", "PARAMD_LOG_LEVEL=warn",
            "PYTHONPATH=/opt/paramd/python", "/usr/bin/python3", "train.py",
            "--fast"});
  // The user's PYTHONPATH stays, after the package.
  setenv("PYTHONPATH", "/home/lib", 1);
  std::vector<std::string> argv = WorkerArgv(config, Launch());
  CHECK(argv[8] == "PYTHONPATH=/opt/paramd/python:/home/lib");
  unsetenv("PYTHONPATH");
  // A program whose name holds '=' is not read as a variable.
  config.worker.command = {"./a=b"};
  WorkerLaunch no_python = Launch();
  no_python.python_path.clear();
  argv = WorkerArgv(config, no_python);
  REQUIRE(argv.size() == 10);
  CHECK(argv[8] == "--");
  CHECK(argv[9] == "./a=b");
}

TEST_CASE("with replicas a rank is given every shard's backup",
          "[paramctl][replication]") {
  WorkerLaunch w = Launch();
  w.backups = {"127.0.0.1:6000", "127.0.0.1:6001"};
  JobConfig config;
  std::vector<std::string> argv = WorkerArgv(config, w);
  REQUIRE(argv.size() == 13);
  CHECK(argv[11] == "--backups");
  CHECK(argv[12] == "127.0.0.1:6000,127.0.0.1:6001");
  // A framework's worker reads them from its environment.
  config.worker.command = {"/usr/bin/python3", "train.py"};
  unsetenv("PYTHONPATH");
  argv = WorkerArgv(config, w);
  CHECK(argv[8] == "PARAMD_BACKUPS=127.0.0.1:6000,127.0.0.1:6001");
  CHECK(argv[9] == "PYTHONPATH=/opt/paramd/python");
}

}  // namespace
}  // namespace paramd
