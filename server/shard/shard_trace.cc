#include "server/shard/shard_trace.h"

#include "absl/strings/str_cat.h"

namespace paramd {

ShardTrace::ShardTrace(const JobConfig& config, int shard)
    : events_(config.tracing, absl::StrCat("server-", shard),
              absl::StrCat("server ", shard), shard) {
  for (int r = 0; r < config.num_workers; ++r) {
    events_.NameThread(r, absl::StrCat("rank ", r));
  }
}

void ShardTrace::Push(int rank, uint64_t clock, absl::Time begin,
                      absl::Time end, uint64_t version, uint64_t bytes,
                      bool duplicate) {
  if (!events_.Wants(clock)) return;
  events_.Add("apply", rank, begin, end,
              absl::StrCat("\"clock\":", clock, ",\"version\":", version,
                           ",\"bytes\":", bytes,
                           ",\"duplicate\":", duplicate ? "true" : "false"));
}

void ShardTrace::Pull(int rank, uint64_t clock, absl::Time begin,
                      absl::Time ready, uint64_t version) {
  // A pull at clock c is the pull half of step c - 1's push+pull.
  if (clock == 0 || !events_.Wants(clock - 1)) return;
  events_.Add("wait", rank, begin, ready,
              absl::StrCat("\"clock\":", clock - 1, ",\"pull_clock\":", clock,
                           ",\"version\":", version));
}

}  // namespace paramd
