#include "worker/worker_timeline.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace paramd {

WorkerTimeline::WorkerTimeline(const JobConfig& config, int rank,
                               int num_shards)
    : rank_(rank),
      num_shards_(num_shards),
      events_(config.tracing, absl::StrCat("worker-", rank),
              absl::StrCat("worker ", rank),
              TraceEvents::kWorkerPidBase + rank) {
  events_.NameThread(0, "steps");
  for (int s = 0; s < num_shards; ++s) {
    events_.NameThread(1 + s, absl::StrCat("shard ", s));
  }
  if (config.worker.overlap) events_.NameThread(exchange_lane(), "exchanges");
}

void WorkerTimeline::Add(absl::string_view name, int lane, absl::Time begin,
                         absl::Time end, uint64_t clock,
                         absl::string_view args) {
  events_.Add(name, lane, begin, end,
              absl::StrCat("\"clock\":", clock, args.empty() ? "" : ",", args));
}

void WorkerTimeline::AddShardCalls(uint64_t clock,
                                   const std::vector<ShardCallTimes>& calls) {
  for (size_t s = 0; s < calls.size(); ++s) {
    const ShardCallTimes& t = calls[s];
    const int lane = 1 + static_cast<int>(s);
    const std::string shard = absl::StrCat("\"shard\":", s);
    if (t.pushed == absl::InfinitePast()) {
      // A unary PushPull: its write is not seen.
      Add("push+wait", lane, t.begin, t.replied, clock, shard);
    } else {
      Add("push", lane, t.begin, t.pushed, clock, shard);
      Add("wait", lane, t.pushed, t.replied, clock, shard);
    }
    Add("pull", lane, t.replied, t.end, clock, shard);
  }
}

std::function<void(const TracingConfig&)> WorkerTimeline::OnTrace() {
  return [this](const TracingConfig& window) {
    if (events_.Arm(window)) {
      spdlog::info("rank {}: tracing steps [{}, {}) into {} (paramctl trace)",
                   rank_, window.from_step, window.from_step + window.steps,
                   window.dir);
    }
  };
}

void WorkerTimeline::WriteIfDone(uint64_t next_clock) {
  if (events_.TakeDone(next_clock)) Write();
}

void WorkerTimeline::Write() const {
  absl::StatusOr<std::string> written = events_.Write();
  if (!written.ok()) {
    spdlog::warn("rank {}: {}", rank_, std::string(written.status().message()));
  }
}

}  // namespace paramd
