#include "worker/step/step_driver.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "worker/retry.h"

namespace paramd {

// All of a round runs on the stepping thread: the transport's `done`s run
// from Start or Poll, and cancelling is asking the transport.
struct StepDriver::Round {
  Round(int n, bool timed) : timed(timed), status(n), times(timed ? n : 0) {
    open.assign(n, true);
  }

  bool AllEnded() const {
    return std::none_of(open.begin(), open.end(), [](bool o) { return o; });
  }

  // The failure to report: one that was not the cancellation a failure
  // caused in the other shards' calls.
  absl::Status Failure() const {
    absl::Status failure;
    for (size_t i = 0; i < status.size(); ++i) {
      const absl::Status& s = status[i];
      if (s.ok()) continue;
      if (failure.ok() ||
          (absl::IsCancelled(failure) && !absl::IsCancelled(s))) {
        failure = PrefixStatus(s, "PushPull to shard ", static_cast<int>(i));
      }
    }
    return failure;
  }

  // The calls' times, each reply no later than its call's end and each
  // push no later than its reply.
  std::vector<ShardCallTimes> Times() const {
    std::vector<ShardCallTimes> out = times;
    for (ShardCallTimes& t : out) {
      t.replied = std::min(t.replied, t.end);
      if (t.pushed != absl::InfinitePast()) {
        t.pushed = std::min(t.pushed, t.replied);
      }
    }
    return out;
  }

  const bool timed;
  std::vector<absl::Status> status;   // By shard, once its call ended.
  std::vector<ShardCallTimes> times;  // By shard; empty untimed.
  std::vector<bool> open;             // Calls not ended, by shard.
  // The shard whose call failed first, after which the others were
  // cancelled (-1: none failed).
  int first_failed = -1;
  bool cancelled = false;  // The driver cancelled every call.
};

StepDriver::StepDriver(Options options, ReplicaChoice* replicas)
    : options_(std::move(options)), replicas_(replicas) {}

absl::StatusOr<uint64_t> StepDriver::Step(StepTransport* transport,
                                          uint64_t clock,
                                          std::function<void()> while_waiting,
                                          std::vector<ShardCallTimes>* times) {
  RetryOptions retry = options_.retry;
  retry.fail_over = [transport] { return transport->FailOver(); };
  // `while_waiting` runs once, in the first attempt that sends.
  return Retry("PushPull", retry, [&] {
    return Attempt(transport, clock, &while_waiting, times);
  });
}

absl::StatusOr<uint64_t> StepDriver::Attempt(
    StepTransport* transport, uint64_t clock,
    std::function<void()>* while_waiting, std::vector<ShardCallTimes>* times) {
  absl::Status s = AttemptOnce(transport, clock, while_waiting, times);
  // A shard that refused how it was reached refused the step whole (and
  // its refusal cancelled the other shards' calls before they could
  // refuse too): the step goes again, each shard refusing once at most.
  for (int again = 0;
       again < transport->shards() && !s.ok() && transport->TakeRefusal();
       ++again) {
    s = AttemptOnce(transport, clock, while_waiting, times);
  }
  RETURN_IF_ERROR(s);
  return transport->Pulled();
}

absl::Status StepDriver::AttemptOnce(StepTransport* transport, uint64_t clock,
                                     std::function<void()>* while_waiting,
                                     std::vector<ShardCallTimes>* times) {
  transport->Begin(times != nullptr);
  Round round(transport->shards(), times != nullptr);
  Start(transport, &round);
  if (*while_waiting) {
    // What is ready goes first (a new call's start, so its first write
    // leaves), then the caller's work, while the servers answer.
    Await(transport, &round, absl::InfinitePast());
    std::exchange(*while_waiting, nullptr)();
  }
  const int hung = AwaitAll(transport, &round);
  if (hung == kPastLimit) {
    return absl::DeadlineExceededError(
        absl::StrCat("PushPull at clock ", clock, ": no reply within ",
                     absl::FormatDuration(options_.limit)));
  }
  if (times != nullptr) *times = round.Times();
  return Conclude(transport, &round, hung);
}

void StepDriver::Start(StepTransport* transport, Round* round) {
  const absl::Time begin =
      round->timed ? options_.retry.clock->Now() : absl::InfinitePast();
  for (int i = 0; i < transport->shards(); ++i) {
    ShardCallTimes* times = nullptr;
    if (round->timed) {
      times = &round->times[i];
      *times = {begin, absl::InfinitePast(), absl::InfinitePast(),
                absl::InfinitePast()};
    }
    transport->Start(i, times, [this, transport, round, i](absl::Status s) {
      replicas_->Heard(i, s);
      if (!s.ok() && !round->cancelled) {
        round->first_failed = i;
        Cancel(transport, round);
      }
      if (round->timed) round->times[i].end = options_.retry.clock->Now();
      round->status[i] = std::move(s);
      round->open[i] = false;
    });
  }
}

bool StepDriver::Await(StepTransport* transport, Round* round,
                       absl::Time until) {
  while (!round->AllEnded()) {
    if (!transport->Poll(until)) return round->AllEnded();
  }
  return true;
}

int StepDriver::AwaitAll(StepTransport* transport, Round* round) {
  Clock* clock = options_.retry.clock;
  const absl::Time limit = clock->Now() + options_.limit;
  // With backups, every hung_after / 4 the shards still waited on are
  // asked whether their server answers anything at all: a hung one's
  // calls would wait out the limit while its backup could serve.
  const absl::Duration watch = replicas_->hung_after() / 4;
  while (!Await(transport, round, std::min(limit, clock->Now() + watch))) {
    if (clock->Now() >= limit) {
      if (!round->cancelled) Cancel(transport, round);
      Await(transport, round, absl::InfiniteFuture());
      return kPastLimit;
    }
    int hung = -1;
    for (int i = 0; hung < 0 && i < transport->shards(); ++i) {
      if (round->open[i] && replicas_->Hung(i)) hung = i;
    }
    if (hung < 0) continue;
    if (!round->cancelled) {
      round->first_failed = hung;
      Cancel(transport, round);
    } else {
      hung = -1;  // Another shard's failure came first: it is the step's.
    }
    Await(transport, round, absl::InfiniteFuture());
    return hung;
  }
  return -1;
}

void StepDriver::Cancel(StepTransport* transport, Round* round) {
  round->cancelled = true;
  for (int i = 0; i < transport->shards(); ++i) transport->Cancel(i);
}

absl::Status StepDriver::Conclude(StepTransport* transport, Round* round,
                                  int hung) {
  absl::Status failure = round->Failure();
  // Only the shard that failed first says something of its server: the
  // others' calls this worker cancelled, however they ended.
  const int first = round->first_failed;
  for (int i = 0; first >= 0 && i < transport->shards(); ++i) {
    if (i != first) replicas_->Note(i, absl::OkStatus());
  }
  if (hung >= 0) {
    const absl::Status silent = absl::UnavailableError(absl::StrCat(
        "PushPull to shard ", hung, ": its server at ", transport->Where(hung),
        " answered nothing, not even a heartbeat, for ",
        absl::FormatDuration(
            absl::Trunc(replicas_->Silence(hung), absl::Milliseconds(100))),
        " (more than liveness.lease_seconds): taken for hung"));
    replicas_->NoteHung(hung, silent);
    return silent;
  }
  if (absl::IsCancelled(failure)) {
    // Only cancellations, none this worker's (it cancels the other shards'
    // calls after a failure, which comes first): their servers ended them.
    for (int i = 0; i < transport->shards(); ++i) {
      if (first >= 0 && i != first) continue;
      if (absl::IsCancelled(round->status[i])) {
        replicas_->Note(i, absl::UnavailableError("ended by its server"));
      }
    }
    failure = CancelledByServer(failure);
  }
  return failure;
}

}  // namespace paramd
