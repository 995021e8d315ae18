// checkpoint_bench: what a checkpoint costs. For a shard of the main job
// and a 64 MiB shard (one server, a 4096x4096 layer, SGD with momentum, so
// the optimizer's slot doubles the bytes): the time to write a checkpoint
// (capture, encode with its CRC, write, fsync, rename, fsync the folder)
// and to restore one (read, check, decode, restore the store), with MB/s;
// then what checkpoints cost the pushes: one rank's pushes (async) with a
// checkpoint every 4 versions against none, mean and slowest. A push that
// reaches a checkpoint's version captures the state under the policy's
// lock and hands it to the shard's checkpoint thread; the write itself is
// off its path.
//
//   bazel run -c opt //tools:checkpoint_bench -- [--dir DIR] [--seconds S]
//
// DIR (default out/checkpoint-bench in the workspace) should be on the disk
// checkpoints would use: on a tmpfs fsync costs nothing.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/flags.h"
#include "common/base/status_macros.h"
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

// One rank's push of every chunk of shard 0 at `clock`.
proto::PushRequest WholePush(const Shard& shard, const std::string& job_id,
                             uint64_t clock) {
  proto::PushRequest r;
  r.set_job_id(job_id);
  r.set_rank(0);
  r.set_clock(clock);
  for (int i = 0; i < shard.store().num_chunks(); ++i) {
    const ChunkSpec& c = shard.store().chunk_spec(i);
    proto::TensorChunk* chunk = r.add_chunks();
    chunk->set_tensor_id(c.tensor_id);
    chunk->set_chunk_index(c.chunk_index);
    chunk->set_dtype(proto::DTYPE_FLOAT32);
    std::vector<float> values(c.length, 1e-6f);
    chunk->set_data(values.data(), values.size() * sizeof(float));
  }
  return r;
}

struct PushTimes {
  double mean = 0, slowest = 0;  // Seconds.
};

// `pushes` pushes of one rank to shard 0 of `config` (one worker, async).
absl::StatusOr<PushTimes> TimePushes(JobConfig config, int pushes) {
  config.num_workers = 1;
  config.policy.type = PolicyType::kAsync;
  ASSIGN_OR_RETURN(std::unique_ptr<Shard> shard, Shard::Create(config, 0));
  for (bool join : {false, true}) {
    proto::RegisterRequest r;
    r.set_job_id(config.job_id);
    r.set_plan_fingerprint(shard->plan().fingerprint());
    r.set_join(join);
    proto::RegisterResponse response;
    RETURN_IF_ERROR(shard->Register(r, &response));
  }
  std::vector<proto::PushRequest> requests;
  for (int c = 0; c < pushes; ++c) {
    requests.push_back(WholePush(*shard, config.job_id, c));
  }
  PushTimes times;
  for (const proto::PushRequest& request : requests) {
    proto::PushResponse response;
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(shard->Push(request, &response));
    const double took = absl::ToDoubleSeconds(absl::Now() - start);
    times.mean += took / pushes;
    times.slowest = std::max(times.slowest, took);
  }
  shard->FlushCheckpoints();
  return times;
}

bool BenchPushes(const std::string& what, JobConfig config,
                 const std::string& dir) {
  constexpr int kPushes = 40;
  JobConfig none = config;
  none.checkpoint.dir.clear();
  config.checkpoint.dir = dir;
  config.checkpoint.keep = 2;
  config.checkpoint.every_steps = 4;
  absl::StatusOr<PushTimes> without = TimePushes(none, kPushes);
  absl::StatusOr<PushTimes> with = TimePushes(config, kPushes);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (!without.ok() || !with.ok()) {
    std::fprintf(stderr, "%s\n",
                 (!without.ok() ? without : with).status().ToString().c_str());
    return false;
  }
  std::printf(
      "%-22s pushes: %8.3f ms mean, %8.3f ms slowest with a checkpoint every "
      "4 versions; %8.3f ms mean, %8.3f ms slowest without\n",
      what.c_str(), with->mean * 1e3, with->slowest * 1e3, without->mean * 1e3,
      without->slowest * 1e3);
  return true;
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
  ok = BenchPushes("main job, shard 0", *main_job, dir) && ok;
  ok = BenchPushes("64 MiB shard", big, dir) && ok;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
