#include "worker/rpc/step_calls.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status_macros.h"
#include "worker/rpc/push_frames.h"

namespace paramd {

struct StepCalls::Round {
  Round(const StepCalls& calls, int n, absl::Span<float> params, bool timed)
      : n(n), timed(timed), status(n), times(timed ? n : 0), open(n, true) {
    const absl::Time begin = timed ? absl::Now() : absl::InfinitePast();
    for (int i = 0; i < n; ++i) {
      sinks.emplace_back(calls.plan_, calls.layout_, i, calls.pull_half_,
                         params);
      if (timed) {
        sinks.back().TimeFirstMessage();
        times[i] = {begin, absl::InfinitePast(), absl::InfinitePast(),
                    absl::InfinitePast()};
      }
    }
  }

  // Shard `i`'s step ended.
  void Ended(int i) {
    if (timed) times[i].end = absl::Now();
    absl::MutexLock lock(&mu);
    open[i] = false;
  }

  // Whether every shard's step ended.
  bool AllEnded() {
    absl::MutexLock lock(&mu);
    return std::none_of(open.begin(), open.end(), [](bool o) { return o; });
  }

  // The shards whose step has not ended.
  std::vector<int> Waiting() {
    std::vector<int> out;
    absl::MutexLock lock(&mu);
    for (int i = 0; i < n; ++i) {
      if (open[i]) out.push_back(i);
    }
    return out;
  }

  // The failure to report: one that was not the cancellation a failure
  // caused in the other shards' steps.
  absl::Status Failure() const {
    absl::Status failure;
    for (int i = 0; i < n; ++i) {
      const absl::Status& s = status[i];
      if (s.ok()) continue;
      if (failure.ok() ||
          (absl::IsCancelled(failure) && !absl::IsCancelled(s))) {
        failure = PrefixStatus(s, "PushPull to shard ", i);
      }
    }
    return failure;
  }

  // The steps' times (the step timeline): when their callbacks ran.
  std::vector<ShardCallTimes> Times() const {
    std::vector<ShardCallTimes> out = times;
    for (int i = 0; i < n; ++i) {
      out[i].replied = std::min(sinks[i].first_message(), out[i].end);
      if (out[i].pushed != absl::InfinitePast()) {
        out[i].pushed = std::min(out[i].pushed, out[i].replied);
      }
    }
    return out;
  }

  const int n;
  const bool timed;
  std::vector<PullSink> sinks;
  // Each written by its step's callback before it ends, read after all
  // ended.
  std::vector<absl::Status> status;
  // Written by the steps' callbacks like the statuses; empty untimed.
  std::vector<ShardCallTimes> times;
  absl::Mutex mu;
  std::vector<bool> open ABSL_GUARDED_BY(mu);  // Steps not ended, by shard.
  // The shard whose step failed first, after which this worker cancelled
  // the others' (-1: none failed).
  std::atomic<int> first_failed{-1};
};

StepCalls::StepCalls(const ClientSetup& setup, ShardLinks* links)
    : plan_(*setup.plan),
      layout_(*setup.layout),
      pull_half_(setup.config->compression.pull_fp16()),
      links_(links) {}

void StepCalls::CancelSteps(Round* round) {
  for (int i = 0; i < round->n; ++i) links_->CancelStep(i);
}

bool StepCalls::Await(Round* round, absl::Time until) {
  while (!round->AllEnded()) {
    if (!links_->PollSteps(until)) return round->AllEnded();
  }
  return true;
}

void StepCalls::Start(std::vector<std::vector<grpc::ByteBuffer>> messages,
                      Round* round) {
  for (int i = 0; i < round->n; ++i) {
    auto done = [this, round, i](absl::Status s) {
      links_->replicas().Heard(i, s);
      if (absl::IsFailedPrecondition(s) &&
          absl::StrContains(s.message(), "shared memory segment")) {
        links_->RefuseSegment(i);
      }
      if (!s.ok()) {
        int none = -1;
        round->first_failed.compare_exchange_strong(none, i);
        CancelSteps(round);
      }
      round->status[i] = std::move(s);
      round->Ended(i);
    };
    links_->StartPushPull(i, std::move(messages[i]), &round->sinks[i],
                          std::move(done),
                          round->timed ? &round->times[i].pushed : nullptr);
  }
}

absl::StatusOr<uint64_t> StepCalls::Run(uint64_t clock,
                                        const Messages& make_messages,
                                        absl::Span<float> params,
                                        std::function<void()>* while_waiting) {
  // Streams first: a new stream has a new segment, which the messages
  // name. A stream that ended since the last step is heard of first, and
  // replaced; every stream the step takes is open before any step can fail
  // and cancel them.
  std::vector<SharedSegment*> segments(links_->size(), nullptr);
  links_->DrainSteps();
  for (int i = 0; i < links_->size(); ++i) {
    links_->OpenStepStream(i);
    segments[i] = links_->segment(i);
  }
  std::vector<std::vector<grpc::ByteBuffer>> messages = make_messages(segments);
  Round round(*this, static_cast<int>(messages.size()), params,
              times_ != nullptr);
  Start(std::move(messages), &round);
  if (while_waiting != nullptr && *while_waiting) {
    // What is ready goes first (a new stream's start, so its first write
    // leaves), then the caller's work, while the servers answer.
    Await(&round, absl::InfinitePast());
    std::function<void()> work = std::exchange(*while_waiting, nullptr);
    work();
  }
  const int hung = AwaitAll(&round);
  if (hung == kPastDeadline) {
    return absl::DeadlineExceededError(
        absl::StrCat("PushPull at clock ", clock, ": no reply within ",
                     absl::FormatDuration(StepLimit())));
  }
  if (times_ != nullptr) *times_ = round.Times();
  RETURN_IF_ERROR(Conclude(&round, hung));
  return PulledVersion(round.sinks);
}

absl::Duration StepCalls::StepLimit() const {
  return std::max(links_->options().push_timeout,
                  links_->options().pull_timeout);
}

int StepCalls::AwaitAll(Round* round) {
  // A stream's step has no deadline of its own: it is bounded here, on the
  // real clock (the streams' own are gRPC's).
  const absl::Time deadline = absl::Now() + StepLimit();
  // With backups, every lease / 4 the shards still waited on are asked
  // whether their server answers anything at all: a hung one's calls
  // would wait out the limit while its backup could serve.
  const absl::Duration watch = links_->options().hung_after / 4;
  while (!Await(round, std::min(deadline, absl::Now() + watch))) {
    if (absl::Now() >= deadline) {
      CancelSteps(round);
      Await(round, absl::InfiniteFuture());
      return kPastDeadline;
    }
    int hung = -1;
    for (int i : round->Waiting()) {
      if (links_->replicas().Hung(i)) {
        hung = i;
        break;
      }
    }
    if (hung < 0) continue;
    int none = -1;
    if (round->first_failed.compare_exchange_strong(none, hung)) {
      CancelSteps(round);
    } else {
      hung = -1;  // Another shard's failure came first: it is the step's.
    }
    Await(round, absl::InfiniteFuture());
    return hung;
  }
  return -1;
}

absl::Status StepCalls::Conclude(Round* round, int hung) {
  absl::Status failure = round->Failure();
  // Only the shard that failed first says something of its server: the
  // others' calls this worker cancelled, however they ended.
  const int first = round->first_failed.load();
  for (int i = 0; first >= 0 && i < round->n; ++i) {
    if (i != first) links_->replicas().Note(i, absl::OkStatus());
  }
  if (hung >= 0) {
    const absl::Status silent = absl::UnavailableError(absl::StrCat(
        "PushPull to shard ", hung, ": its server at ", links_->address(hung),
        " answered nothing, not even a heartbeat, for ",
        absl::FormatDuration(absl::Trunc(links_->replicas().Silence(hung),
                                         absl::Milliseconds(100))),
        " (more than liveness.lease_seconds): taken for hung"));
    links_->replicas().NoteHung(hung, silent);
    return silent;
  }
  if (absl::IsCancelled(failure)) {
    // Only cancellations, none this worker's (it cancels the other shards'
    // calls after a failure, which comes first): their servers ended them.
    for (int i = 0; i < round->n; ++i) {
      if (first >= 0 && i != first) continue;
      if (absl::IsCancelled(round->status[i])) {
        links_->replicas().Note(i,
                                absl::UnavailableError("ended by its server"));
      }
    }
    failure = CancelledByServer(failure);
  }
  return failure;
}

}  // namespace paramd
