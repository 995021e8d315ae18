// paramctl run's folders: its own run folder (pid file, port files, its
// checkpoint folder, removed with the run), the sweep of folders left by
// runs whose paramctl was killed, and the checks on checkpoint.dir before
// a run starts.
#include "tools/ctl/run_folder.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

void WritePid(const std::string& dir, long pid) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/paramctl.pid") << pid << "\n";
}

// A pid that belonged to a process which has exited and been reaped.
pid_t DeadPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  return child;
}

TEST_CASE(
    "a run folder holds its paramctl's pid and port files and goes with "
    "the run",
    "[paramctl][run_folder]") {
  const std::string parent = testing::NewTempDir();
  std::string path;
  {
    absl::StatusOr<std::unique_ptr<RunFolder>> folder =
        RunFolder::Create(parent);
    REQUIRE(folder.ok());
    path = (*folder)->path();
    CHECK(path.rfind(parent + "/paramd-run-", 0) == 0);
    std::ifstream pid_file(path + "/paramctl.pid");
    long pid = 0;
    REQUIRE(pid_file >> pid);
    CHECK(pid == getpid());
    CHECK((*folder)->CheckpointDir() == path + "/checkpoints");
    CHECK((*folder)->ReadPort(1) == 0);
    std::ofstream((*folder)->PortFile(1)) << "4567\n";
    CHECK((*folder)->ReadPort(1) == 4567);
    CHECK((*folder)->swept() == 0);
  }
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE(
    "only run folders whose paramctl is gone are swept: not a live one's, "
    "not one without a pid file, not other folders",
    "[paramctl][run_folder]") {
  const std::string parent = testing::NewTempDir();
  const pid_t dead = DeadPid();
  WritePid(parent + "/paramd-run-killed", dead);
  std::ofstream(parent + "/paramd-run-killed/shard-0.port") << "1\n";
  WritePid(parent + "/paramd-run-running", getpid());
  std::filesystem::create_directories(parent + "/paramd-run-starting");
  WritePid(parent + "/unrelated", dead);
  CHECK(SweepStaleRunFolders(parent) == 1);
  CHECK_FALSE(std::filesystem::exists(parent + "/paramd-run-killed"));
  CHECK(std::filesystem::exists(parent + "/paramd-run-running"));
  CHECK(std::filesystem::exists(parent + "/paramd-run-starting"));
  CHECK(std::filesystem::exists(parent + "/unrelated"));

  // A new run sweeps before it makes its own, and says how many.
  WritePid(parent + "/paramd-run-killed2", dead);
  absl::StatusOr<std::unique_ptr<RunFolder>> folder = RunFolder::Create(parent);
  REQUIRE(folder.ok());
  CHECK((*folder)->swept() == 1);
  CHECK_FALSE(std::filesystem::exists(parent + "/paramd-run-killed2"));
}

TEST_CASE("checkpoint.dir and --resume / --fresh before a run starts",
          "[paramctl][run_folder]") {
  JobConfig config;
  CHECK(CheckCheckpointDir(config, false, false).ok());
  CHECK(CheckCheckpointDir(config, true, true).message() ==
        "--resume and --fresh exclude each other");
  CHECK(CheckCheckpointDir(config, true, false).message() ==
        "--resume and --fresh need checkpoint.dir in the job file");
  config.checkpoint.dir = testing::NewTempDir();
  CHECK(CheckCheckpointDir(config, false, false).ok());
  CHECK(CheckCheckpointDir(config, false, true).ok());
  CHECK(CheckCheckpointDir(config, true, false).message() ==
        absl::StrCat("--resume: checkpoint.dir ", config.checkpoint.dir,
                     " holds no checkpoint"));
  std::ofstream(config.checkpoint.dir + "/shard-0-v00000000000000000008.ckpt")
      << "x";
  CHECK(CheckCheckpointDir(config, false, false).message() ==
        absl::StrCat("checkpoint.dir ", config.checkpoint.dir,
                     " holds 1 checkpoint(s) of an earlier run: pass --resume "
                     "to continue from them or --fresh to discard them"));
  CHECK(CheckCheckpointDir(config, true, false).ok());
}

}  // namespace
}  // namespace paramd
