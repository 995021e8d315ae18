// PolicyRule: what one consistency model decides for its UpdatePolicy —
// who takes part in what (the clock a rank joins at), how a push is
// accepted, when a pull may read, and whom a waiting pull waits for —
// over the policy's one rank table. The policy keeps everything the
// models share (the live set's changes, exactly once, staleness counts,
// the initial-values gate, waiters, capture and replication) and calls
// its rule with its lock held; a rule is not thread-safe itself.
//
// SyncRule (sync_rule.h) and StalenessRule (staleness_rule.h) are the
// job file's three policies.
#ifndef PARAMD_SERVER_POLICY_POLICY_RULE_H_
#define PARAMD_SERVER_POLICY_POLICY_RULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "server/policy/rank_table.h"
#include "server/store/shard_store.h"

namespace paramd {

// A push as the policy hands it to its rule: checked for size and
// finiteness, not a retry, from a live rank. UpdatePolicy::Push says what
// each field means.
struct RulePush {
  int rank = 0;
  uint64_t clock = 0;
  uint64_t staleness = 1;                           // Its tau (push_staleness).
  absl::Span<const absl::Span<const float>> grads;  // By local chunk.
  absl::Span<const RowGrads> rows;
  bool skip = false;
  StepTimes* times = nullptr;
};

class PolicyRule {
 public:
  virtual ~PolicyRule() = default;

  virtual const char* name() const = 0;

  // Taking part. The clock `rank` could (re)join at now.
  virtual uint64_t JoinClock(const RankTable& ranks, int rank) const = 0;
  // Whether `rank` may join at `clock` (Aborted, "register again", when
  // the rule moved past it); on OK the policy marks it live there.
  virtual absl::Status Admit(const RankTable& ranks, int rank,
                             uint64_t clock) = 0;
  // After a rank joined or left the live set.
  virtual void MembersChanged(const RankTable& ranks) {}

  // Pushes. Accepts a push: applied (or taken into a round) and OK, or an
  // error and nothing kept. `*dropped`: acknowledged, never applied (a
  // late push under backup workers). On OK the rank pushes clock + 1 next.
  virtual absl::Status Accept(const RankTable& ranks, const RulePush& push,
                              bool* dropped) = 0;
  // Part of a push (UpdatePolicy::PushChunks): the chunks `locals` of
  // push.grads. `*complete` once the rank's whole push is in (then it
  // pushes clock + 1 next); `*duplicate` when every chunk was in already.
  // Only a rule whose rounds commit chunk by chunk takes it.
  virtual absl::Status AcceptChunks(const RankTable& /*ranks*/,
                                    const RulePush& /*push*/,
                                    absl::Span<const int> /*locals*/,
                                    bool* /*complete*/, bool* /*duplicate*/) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Push: a push in slices needs policy sync; this job's is ", name()));
  }

  // Reads. Whether `rank` at `clock` may read the store — the chunks
  // `locals` only, when not empty (a read of a round still in slices).
  virtual bool Readable(const RankTable& ranks, int rank, uint64_t clock,
                        absl::Span<const int> locals) const = 0;
  // The ranks a pull that may not read waits for, and in words.
  virtual std::vector<int> Awaited(const RankTable& ranks, int rank,
                                   uint64_t clock) const = 0;
  virtual std::string Describe(const RankTable& ranks, int rank,
                               uint64_t clock) const = 0;

  // State. A restored shard asked to join a rank at `clock`, beyond the
  // clocks it knows: catch up (sync moves its round and the store's
  // version).
  virtual void CatchUp(uint64_t clock) {}
  // After the policy restored the store and the table's clocks from
  // `state`.
  virtual void Restored(const PolicyState& state, RankTable* ranks) {}
  // Capture's part: leave out what the state does not hold yet.
  virtual void AdjustCapture(PolicyState* state) const {}
};

}  // namespace paramd

#endif  // PARAMD_SERVER_POLICY_POLICY_RULE_H_
