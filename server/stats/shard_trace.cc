#include "server/stats/shard_trace.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace paramd {

namespace {

void Fill(const TracingConfig& window, proto::TraceWindow* out) {
  out->set_dir(window.dir);
  out->set_from_step(static_cast<uint64_t>(window.from_step));
  out->set_steps(static_cast<uint64_t>(window.steps));
}

}  // namespace

ShardTrace::ShardTrace(const JobConfig& config, int shard)
    : shard_(shard),
      workers_(config.num_workers),
      events_(config.tracing, absl::StrCat("server-", shard),
              absl::StrCat("server ", shard), shard) {
  for (int r = 0; r < config.num_workers; ++r) {
    events_.NameThread(r, absl::StrCat("rank ", r, " pushes"));
    events_.NameThread(workers_ + r, absl::StrCat("rank ", r, " pulls"));
  }
}

void ShardTrace::Push(int rank, uint64_t clock, absl::Time begin,
                      absl::Time end, uint64_t version, uint64_t bytes,
                      bool duplicate, uint64_t staleness) {
  if (!events_.Wants(clock)) return;
  events_.Add("apply", rank, begin, end,
              absl::StrCat("\"clock\":", clock, ",\"rank\":", rank,
                           ",\"version\":", version, ",\"bytes\":", bytes,
                           ",\"staleness\":", staleness,
                           ",\"duplicate\":", duplicate ? "true" : "false"));
}

void ShardTrace::Step(int rank, uint64_t clock, const StepTimes& times,
                      const ShardStore& store) {
  if (!times.taken || times.chunk_ends.empty() || !events_.Wants(clock)) {
    return;
  }
  const std::string args = absl::StrCat("\"clock\":", clock, ",\"rank\":", rank,
                                        ",\"version\":", times.version);
  events_.Add("step", rank, times.begin, times.chunk_ends.back(),
              absl::StrCat(args, ",\"chunks\":", times.chunk_ends.size()));
  if (times.copied > times.begin) {
    events_.Add("copy", rank, times.begin, times.copied, args);
  }
  absl::Time from = times.copied;
  for (size_t i = 0; i < times.chunk_ends.size(); ++i) {
    const ChunkSpec& c = store.chunk_spec(static_cast<int>(i));
    events_.Add(
        "chunk", rank, from, times.chunk_ends[i],
        absl::StrCat(args, ",\"chunk\":", i, ",\"tensor\":", c.tensor_id,
                     ",\"index\":", c.chunk_index, ",\"elements\":", c.length));
    from = times.chunk_ends[i];
  }
}

void ShardTrace::Pull(int rank, uint64_t clock, absl::Time begin,
                      absl::Time ready, uint64_t version) {
  // A pull at clock c is the pull half of step c - 1's push+pull.
  if (!WantsPull(clock)) return;
  events_.Add(
      "wait", workers_ + rank, begin, ready,
      absl::StrCat("\"clock\":", clock - 1, ",\"rank\":", rank,
                   ",\"pull_clock\":", clock, ",\"version\":", version));
}

void ShardTrace::Reply(int rank, uint64_t clock, absl::Time begin,
                       absl::Time end, uint64_t bytes) {
  if (!WantsPull(clock)) return;
  events_.Add("reply", workers_ + rank, begin, end,
              absl::StrCat("\"clock\":", clock - 1, ",\"rank\":", rank,
                           ",\"bytes\":", bytes));
}

absl::StatusOr<proto::TraceResponse> ShardTrace::Serve(
    const proto::TraceRequest& request) {
  if (!request.has_window() && !request.write()) {
    return absl::InvalidArgumentError(
        "TraceRequest: neither window nor write is set");
  }
  proto::TraceResponse response;
  if (request.has_window()) {
    const proto::TraceWindow& w = request.window();
    if (w.dir().empty() || w.dir()[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "TraceRequest.window.dir: '", w.dir(),
          "' is not an absolute path (each process writes there on its host)"));
    }
    if (w.steps() == 0 ||
        w.steps() > static_cast<uint64_t>(TracingConfig::kMaxSteps)) {
      return absl::InvalidArgumentError(
          absl::StrCat("TraceRequest.window.steps: ", w.steps(),
                       " is outside 1..", TracingConfig::kMaxSteps));
    }
    if (w.from_step() > UINT64_MAX / 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TraceRequest.window.from_step: ", w.from_step(), " is too large"));
    }
    TracingConfig window;
    window.dir = w.dir();
    window.from_step = static_cast<int64_t>(w.from_step());
    window.steps = static_cast<int64_t>(w.steps());
    if (events_.Arm(window)) {
      spdlog::info("shard {}: tracing steps [{}, {}) into {} (paramctl trace)",
                   shard_, w.from_step(), w.from_step() + w.steps(), w.dir());
    }
    absl::MutexLock lock(&mu_);
    live_ = window;
  }
  {
    absl::MutexLock lock(&mu_);
    if (live_.has_value()) Fill(*live_, response.mutable_window());
  }
  if (request.write()) {
    if (!events_.on()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "TraceRequest.write: shard ", shard_,
          " records no trace (no tracing section, and no window armed)"));
    }
    absl::StatusOr<std::string> path = events_.Write();
    if (!path.ok()) return path.status();
    response.set_path(*path);
  }
  response.set_events(events_.events());
  return response;
}

void ShardTrace::FillHeartbeat(uint64_t clock,
                               proto::HeartbeatResponse* response) const {
  absl::MutexLock lock(&mu_);
  if (!live_.has_value() ||
      clock >= static_cast<uint64_t>(live_->from_step + live_->steps)) {
    return;
  }
  Fill(*live_, response->mutable_trace());
}

}  // namespace paramd
