#include "tools/ctl/live_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/trace/trace_events.h"
#include "tools/ctl/rpc/status_client.h"

namespace paramd {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(10);
constexpr absl::Duration kRateSpan = absl::Milliseconds(500);

// The fastest live worker's clock and the live ranks, over every shard.
struct Progress {
  uint64_t clock = 0;
  std::set<int> live;
};

absl::StatusOr<Progress> ReadProgress(const LiveTraceOptions& o) {
  Progress p;
  for (const ServerStatus& s :
       QueryAllStatus(o.addresses, *o.security, kCallTimeout)) {
    if (!s.status.ok()) return s.status.status();
    for (const proto::WorkerStatus& w : s.status->workers()) {
      if (w.state() != "live") continue;
      p.live.insert(static_cast<int>(w.rank()));
      p.clock = std::max<uint64_t>(p.clock, w.clock());
    }
  }
  if (p.live.empty()) {
    return absl::FailedPreconditionError(
        "paramctl trace: no worker of the job is live (is it running?)");
  }
  return p;
}

absl::Status PrepareDir(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("paramctl trace: --dir ", dir,
                     ": cannot create it: ", error.message()));
  }
  for (const auto& e : std::filesystem::directory_iterator(dir, error)) {
    if (e.path().extension() == ".jsonl") {
      return absl::InvalidArgumentError(absl::StrCat(
          "paramctl trace: --dir ", dir, " holds trace files already (",
          e.path().filename().string(), "); give a new or empty folder"));
    }
  }
  return absl::OkStatus();
}

std::string WorkerFile(const std::string& dir, int rank) {
  return absl::StrCat(dir, "/worker-", rank, ".jsonl");
}

// The first step of the window: --from_step, or a little ahead of the
// fastest live worker at the rate it goes (read over kRateSpan), so that
// every worker hears of the window before it gets there. `now` and `rate`
// (steps per second; 0 unmeasured) are what was read.
absl::StatusOr<uint64_t> WindowStart(const LiveTraceOptions& o, Progress* now,
                                     double* rate) {
  absl::StatusOr<Progress> first = ReadProgress(o);
  if (!first.ok()) return first.status();
  *now = *first;
  if (o.from_step.has_value()) return *o.from_step;
  // The rate is the job's, on the real clock.
  const absl::Time t0 = absl::Now();
  absl::SleepFor(kRateSpan);
  absl::StatusOr<Progress> second = ReadProgress(o);
  if (!second.ok()) return second.status();
  *now = *second;
  *rate = static_cast<double>(now->clock - std::min(now->clock, first->clock)) /
          absl::ToDoubleSeconds(absl::Now() - t0);
  const double lead_seconds = 2.5 * o.heartbeat_seconds;
  return now->clock + 2 +
         static_cast<uint64_t>(std::ceil(*rate * lead_seconds));
}

// Waits until each of `live` wrote its file in `dir` (once past the
// window), or the deadline; returns the ranks whose file is missing. The
// files are another process's: looked for every 100 ms.
std::vector<int> AwaitWorkerFiles(const std::string& dir,
                                  const std::set<int>& live,
                                  absl::Time deadline) {
  std::vector<int> missing;
  while (true) {
    missing.clear();
    for (int rank : live) {
      if (!std::filesystem::exists(WorkerFile(dir, rank))) {
        missing.push_back(rank);
      }
    }
    if (missing.empty() || absl::Now() > deadline) return missing;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace

absl::StatusOr<std::string> TraceRunningJob(const LiveTraceOptions& o) {
  if (o.steps == 0) {
    return absl::InvalidArgumentError("paramctl trace: --steps must be >= 1");
  }
  const std::string dir = std::filesystem::absolute(o.dir).lexically_normal();
  if (absl::Status s = PrepareDir(dir); !s.ok()) return s;

  Progress now;
  double rate = 0;  // Steps per second of the fastest worker.
  absl::StatusOr<uint64_t> start = WindowStart(o, &now, &rate);
  if (!start.ok()) return start.status();
  const uint64_t from = *start;
  proto::TraceRequest arm;
  arm.mutable_window()->set_dir(dir);
  arm.mutable_window()->set_from_step(from);
  arm.mutable_window()->set_steps(o.steps);
  for (const std::string& a : o.addresses) {
    absl::StatusOr<proto::TraceResponse> r =
        RequestTrace(a, *o.security, arm, kCallTimeout);
    if (!r.ok()) return r.status();
  }
  const uint64_t to = from + o.steps;
  // When the window should be over, at the rate seen; then o.wait more.
  const absl::Duration expected =
      rate > 0 ? absl::Seconds(
                     static_cast<double>(to - std::min(to, now.clock)) / rate)
               : absl::ZeroDuration();
  std::printf(
      "paramctl: tracing steps [%llu, %llu) of %zu live worker(s) (the "
      "fastest is at clock %llu%s) into %s\n",
      static_cast<unsigned long long>(from),
      static_cast<unsigned long long>(to), now.live.size(),
      static_cast<unsigned long long>(now.clock),
      rate > 0 ? absl::StrCat(", ", static_cast<int>(rate), " steps/s").c_str()
               : "",
      dir.c_str());
  std::fflush(stdout);

  // Each live worker writes its file once past the window.
  const std::vector<int> missing =
      AwaitWorkerFiles(dir, now.live, absl::Now() + expected + o.wait);
  if (!missing.empty()) {
    std::printf(
        "paramctl: no timeline from rank(s) %s within %s (on another host, "
        "or not past step %llu yet): merging without it\n",
        absl::StrJoin(missing, ", ").c_str(),
        absl::FormatDuration(expected + o.wait).c_str(),
        static_cast<unsigned long long>(to));
  }
  proto::TraceRequest write;
  write.set_write(true);
  for (size_t k = 0; k < o.addresses.size(); ++k) {
    absl::StatusOr<proto::TraceResponse> r =
        RequestTrace(o.addresses[k], *o.security, write, kCallTimeout);
    if (!r.ok()) return r.status();
    if (!std::filesystem::exists(r->path())) {
      std::printf(
          "paramctl: shard %zu wrote %s on its host (not here): copy it into "
          "%s and run paramctl trace %s\n",
          k, r->path().c_str(), dir.c_str(), dir.c_str());
    }
  }
  const std::string output = dir + "/trace.json";
  if (absl::Status s = TraceEvents::MergeTo(dir, output); !s.ok()) return s;
  return output;
}

}  // namespace paramd
