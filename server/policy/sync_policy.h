// SyncPolicy: bulk-synchronous parallel (BSP) over the live workers.
//
// Round t collects one clock-t gradient from each live worker; when every
// live worker has pushed (a worker leaving mid-round stops being waited
// for; a gradient it already pushed still counts), their mean is applied in
// one optimizer step and version t+1 is published. A worker at clock c may
// read once the version is at least c. Pushes for another round, or a
// second push of a rank in one round, are refused and change nothing. A
// rank (re)joins at the current round (the next one if its gradient for
// the current round is already in) or a later one: rounds before that do
// not wait for it, and a round without a push that no live rank takes
// part in is passed without a step.
#ifndef PARAMD_SERVER_POLICY_SYNC_POLICY_H_
#define PARAMD_SERVER_POLICY_SYNC_POLICY_H_

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/policy/update_policy.h"

namespace paramd {

class SyncPolicy : public UpdatePolicy {
 public:
  // `store` must outlive the policy. With `backup_workers` b > 0 a round
  // closes once at most b live ranks are missing from it (Chen et al.,
  // "Revisiting Distributed Synchronous SGD", 2016); a push of a round
  // that closed without it is acknowledged, counted and dropped (never
  // applied to a later round), and the rank continues at a later round.
  SyncPolicy(int num_workers, ShardStore* store, int backup_workers = 0);

  const char* name() const override { return "sync"; }

 protected:
  uint64_t JoinClock(int rank) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CanJoinAt(int rank, uint64_t clock) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnLeave(int rank) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnJoin(int rank) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CatchUp(uint64_t clock) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRestore() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdjustCapture(PolicyState* state) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Accept(int rank, uint64_t clock, uint64_t staleness,
                      absl::Span<const absl::Span<const float>> grads,
                      absl::Span<const RowGrads> rows, bool skip,
                      StepTimes* times) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Readable(int rank, uint64_t clock) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<int> Awaited(int rank, uint64_t clock) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Describe(int rank, uint64_t clock) const override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  // Whether round_ waits for `rank`.
  bool Expected(int rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return workers_[rank].live && !pushed_[rank] &&
           expected_from_[rank] <= round_;
  }
  // Whether the round is complete: one rank pushed and at most
  // backup_workers_ expected ranks have not.
  bool RoundComplete() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the round's num_summed_-th gradient (counted already); `last`:
  // it completes the round, so it goes into the mean.
  void AddGradient(absl::Span<const absl::Span<const float>> grads, bool last)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A round without a push that no live rank takes part in — each joined
  // at a later round: a worker that died between its pushes to two shards
  // reached the other shard and registered again past this round there —
  // would wait forever: the version moves on without a step to the first
  // round a live rank takes part in (none live: it stays).
  void PassRoundsNobodyTakes() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the round once it is complete; `times` as in Push.
  void MaybeFinishRound(StepTimes* times = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One optimizer step with the mean of the round's summed gradients and
  // rows (num_summed_ > 0).
  void ApplyMean(StepTimes* times) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int backup_workers_;
  uint64_t round_ ABSL_GUARDED_BY(mu_) = 0;  // == store_->version()
  std::vector<bool> pushed_ ABSL_GUARDED_BY(mu_);
  // The first round each rank takes part in (after it joined).
  std::vector<uint64_t> expected_from_ ABSL_GUARDED_BY(mu_);
  int num_pushed_ ABSL_GUARDED_BY(mu_) = 0;  // Ranks in the round.
  // Of those, the ones whose gradient is in sum_ (not skipped).
  int num_summed_ ABSL_GUARDED_BY(mu_) = 0;
  // The round's row gradients by table: the sum of every push's rows.
  struct RowSums {
    absl::flat_hash_map<uint64_t, uint32_t> at;  // Id → its place in ids.
    std::vector<uint64_t> ids;
    std::vector<double> sums;  // dim per id.
    std::vector<float> mean;
    uint64_t fresh = 0;  // Ids the table did not hold when added.
  };
  std::vector<RowSums> row_sums_ ABSL_GUARDED_BY(mu_);
  // Adds `rows` to row_sums_.
  void AddRows(absl::Span<const RowGrads> rows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ClearRows() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sum of this round's gradients, by local chunk, in double: finite
  // float gradients never overflow it (two of 3e38 sum to 6e38). Used
  // from a round's second gradient when more follow (AddGradient);
  // allocated then.
  std::vector<std::vector<double>> sum_ ABSL_GUARDED_BY(mu_);
  // The round's mean, rounded to float once, for the optimizer; before
  // that, the round's first gradient.
  std::vector<std::vector<float>> mean_ ABSL_GUARDED_BY(mu_);
  // mean_ holds the round's mean (its only gradient, or the last one
  // added into it).
  bool mean_ready_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_POLICY_SYNC_POLICY_H_
