// checkpoint_bench: what a checkpoint costs. For a shard of the main job
// and a 64 MiB shard (one server, a 4096x4096 layer, SGD with momentum, so
// the optimizer's slot doubles the bytes): the time to write a checkpoint
// (capture, encode with its CRC, write, fsync, rename, fsync the folder)
// and to restore one (read, check, decode, restore the store), with MB/s.
//
//   bazel run -c opt //tools:checkpoint_bench -- [--dir DIR] [--seconds S]
//
// DIR (default out/checkpoint-bench in the workspace) should be on the disk
// checkpoints would use: on a tmpfs fsync costs nothing.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/flags.h"
#include "common/config/job_file.h"
#include "server/shard/shard.h"
#include "tools/bench/bench_timing.h"

namespace paramd {
namespace {

// Seconds per Shard::Create of `config` shard 0, which restores the newest
// checkpoint when `config` has one.
double CreateSeconds(const JobConfig& config, double seconds) {
  return SecondsPerCall(seconds, [&] { return Shard::Create(config, 0).ok(); });
}

bool Bench(const std::string& what, JobConfig config, const std::string& dir,
           double seconds) {
  config.checkpoint.dir = dir;
  config.checkpoint.keep = 2;
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  auto shard = Shard::Create(config, 0);
  if (!shard.ok()) {
    std::fprintf(stderr, "%s\n", std::string(shard.status().message()).c_str());
    return false;
  }
  const double write =
      SecondsPerCall(seconds, [&] { return (*shard)->CheckpointNow().ok(); });
  auto written = (*shard)->CheckpointNow();
  if (!written.ok()) return false;
  const double bytes =
      static_cast<double>(std::filesystem::file_size(written->path()));
  shard->reset();
  const double with_restore = CreateSeconds(config, seconds);
  JobConfig none = config;
  none.checkpoint.dir.clear();
  const double fresh = CreateSeconds(none, seconds);
  const double restore = with_restore - fresh;
  std::printf(
      "%-22s %8.2f MB  write %8.2f ms (%6.0f MB/s)  restore %8.2f ms (%6.0f "
      "MB/s; Shard::Create %.2f ms with it, %.2f ms without)\n",
      what.c_str(), bytes / 1e6, write * 1e3, bytes / write / 1e6,
      restore * 1e3, bytes / restore / 1e6, with_restore * 1e3, fresh * 1e3);
  std::filesystem::remove_all(dir, ignored);
  return true;
}

int Main(int argc, char** argv) {
  auto flags = ParseFlags(argc, argv, {"dir", "seconds", "job"}, {});
  if (!flags.ok()) {
    std::fprintf(stderr, "checkpoint_bench: %s\n",
                 std::string(flags.status().message()).c_str());
    return 2;
  }
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const std::string root = workspace != nullptr ? workspace : ".";
  const std::string dir = flags->Get("dir", root + "/out/checkpoint-bench");
  const double seconds = std::atof(flags->Get("seconds", "2").c_str());
  auto main_job = LoadJobConfig(
      flags->Get("job", root + "/configs/fashion_mnist_mlp.yaml"));
  if (!main_job.ok()) {
    std::fprintf(stderr, "checkpoint_bench: %s\n",
                 std::string(main_job.status().message()).c_str());
    return 1;
  }
  std::printf("checkpoints in %s\n", dir.c_str());
  bool ok = Bench("main job, shard 0", *main_job, dir, seconds);
  JobConfig big = *main_job;
  big.servers = {"127.0.0.1:0"};
  big.model.layers = {4096, 4096};
  ok = Bench("64 MiB shard", big, dir, seconds) && ok;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
