// SyncRule: bulk-synchronous parallel (BSP) over the live workers.
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
//
// A push may also come in slices (AcceptChunks: some of its chunks at a
// time). The round then commits chunk by chunk: a chunk every expected
// rank has pushed is stepped at once (ShardStore::StepChunks) and may be
// read at version t+1 (Readable with those chunks) while other chunks
// still wait; the version moves when the last chunk is in. A rank whose
// push is partly in when it leaves counts in the chunks it sent and not in
// the others.
//
// Rows of a table with policy async (EmbeddingTableConfig::policy) are
// not part of the rounds: each accepted push's rows of such a table are
// applied at once, by themselves (ShardStore::ApplyRows; the version
// stays), while its chunks and its other tables' rows wait for the round.
// A capture mid-round holds those rows, so it names each such push
// (PolicyState::rows_applied): its retry after a restore brings its
// chunks and other rows into the round, and not those rows again.
#ifndef PARAMD_SERVER_POLICY_SYNC_RULE_H_
#define PARAMD_SERVER_POLICY_SYNC_RULE_H_

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/policy/policy_rule.h"

namespace paramd {

class SyncRule : public PolicyRule {
 public:
  // `store` must outlive the rule. With `backup_workers` b > 0 a round
  // closes once at most b live ranks are missing from it (Chen et al.,
  // "Revisiting Distributed Synchronous SGD", 2016); a push of a round
  // that closed without it is acknowledged, counted and dropped (never
  // applied to a later round), and the rank continues at a later round.
  SyncRule(int num_workers, ShardStore* store, int backup_workers = 0);

  const char* name() const override { return "sync"; }

  uint64_t JoinClock(const RankTable& ranks, int rank) const override;
  absl::Status Admit(const RankTable& ranks, int rank, uint64_t clock) override;
  // A rank that left stops being waited for; one joining at a later round
  // than one it was expected in (a retried registration) no longer holds
  // the current round.
  void MembersChanged(const RankTable& ranks) override;
  absl::Status Accept(const RankTable& ranks, const RulePush& push,
                      bool* dropped) override;
  absl::Status AcceptChunks(const RankTable& ranks, const RulePush& push,
                            absl::Span<const int> locals, bool* complete,
                            bool* duplicate) override;
  bool Readable(const RankTable& ranks, int rank, uint64_t clock,
                absl::Span<const int> locals) const override;
  std::vector<int> Awaited(const RankTable& ranks, int rank,
                           uint64_t clock) const override;
  std::string Describe(const RankTable& ranks, int rank,
                       uint64_t clock) const override;
  void CatchUp(uint64_t clock) override;
  void Restored(const PolicyState& state, RankTable* ranks) override;
  void AdjustCapture(PolicyState* state) const override;

 private:
  // Whether round_ waits for `rank`'s push (or the rest of it).
  bool Expected(const RankTable& ranks, int rank) const {
    return ranks[rank].live && !pushed_[rank] && expected_from_[rank] <= round_;
  }
  // Whether `rank` pushed chunk `c` in this round.
  bool Has(int c, int rank) const {
    return has_[static_cast<size_t>(c) * num_workers_ + rank] != 0;
  }
  // FailedPrecondition unless `clock` is the round `rank` takes part in,
  // AlreadyExists when its whole push is in.
  absl::Status CheckRound(int rank, uint64_t clock) const;
  // Whether some rank's push is in in part (a push in slices).
  bool AnyPartPushed() const;
  // Whether the round is complete: one rank took part and at most
  // backup_workers_ expected ranks have not pushed (all of) theirs.
  bool RoundComplete(const RankTable& ranks) const;
  // Whether chunk `c` may be stepped: one rank pushed it and at most
  // backup_workers_ expected ranks have not.
  bool ChunkComplete(const RankTable& ranks, int c) const;
  // Takes `rank`'s gradient of the chunks `locals` (grads by local
  // index; a chunk the rank pushed already this round is skipped): in the
  // round, and unless `skip` in each chunk's mean. `*complete`: the rank's
  // whole push is in now; `*duplicate`: every one of the chunks was in.
  void AddChunks(const RankTable& ranks, int rank, absl::Span<const int> locals,
                 absl::Span<const absl::Span<const float>> grads, bool skip,
                 bool* complete, bool* duplicate);
  // Adds chunk c's summed_[c]-th gradient (counted already); `last`: it
  // completes the chunk, so it goes into the mean.
  void AddGradient(int c, absl::Span<const float> grad, bool last);
  // Chunk c's mean of its summed gradients in mean_[c] (summed_[c] > 0).
  void MakeMean(int c);
  // A round without a push that no live rank takes part in — each joined
  // at a later round: a worker that died between its pushes to two shards
  // reached the other shard and registered again past this round there —
  // would wait forever: the version moves on without a step to the first
  // round a live rank takes part in (none live: it stays).
  void PassRoundsNobodyTakes(const RankTable& ranks);
  // Steps the chunks that are complete, and applies the round once it is;
  // `times` as in UpdatePolicy::Push.
  void MaybeFinishRound(const RankTable& ranks, StepTimes* times = nullptr);
  // The round in one optimizer step with the mean of its summed gradients
  // and rows (every push whole, num_summed_ > 0).
  void ApplyMean(StepTimes* times);
  // Steps the chunks `locals` (ShardStore::StepChunks); a chunk no
  // gradient reached is left as it is.
  void StepChunks(const std::vector<int>& locals);
  // The round's rows, averaged over its num_summed_ pushes.
  std::vector<RowGrads> RowMeans();
  // The next round: every per-round count back to none.
  void NextRound();

  const int num_workers_;
  ShardStore* const store_;
  const int backup_workers_;
  const int num_chunks_;
  const std::vector<int> all_chunks_;  // 0 .. num_chunks_ - 1.
  uint64_t round_ = 0;                 // == store_->version()
  // By rank: its whole push of the round is in.
  std::vector<bool> pushed_;
  // By rank: how many of its chunks are in (a push in slices).
  std::vector<int> chunks_in_;
  // The first round each rank takes part in (after it joined).
  std::vector<uint64_t> expected_from_;
  // Ranks in the round: some or all of their push in.
  int num_pushed_ = 0;
  // Whole pushes of the round whose gradient is summed (not skipped): its
  // rows' divisor.
  int num_summed_ = 0;
  // By chunk: the ranks that pushed it (chunk * num_workers + rank), how
  // many did, how many of those are summed, whether its mean is in mean_
  // (its only gradient, or the last one added into it), and whether it
  // was stepped this round.
  std::vector<char> has_;
  std::vector<int> count_;
  std::vector<int> summed_;
  std::vector<char> mean_ready_;
  std::vector<char> committed_;
  int num_committed_ = 0;
  // The round's row gradients by table: the sum of every push's rows.
  struct RowSums {
    absl::flat_hash_map<uint64_t, uint32_t> at;  // Id → its place in ids.
    std::vector<uint64_t> ids;
    std::vector<double> sums;  // dim per id.
    std::vector<float> mean;
    uint64_t fresh = 0;  // Ids the table did not hold when added.
  };
  std::vector<RowSums> row_sums_;
  // By rank: the clock of its push in this round whose async tables' rows
  // are applied (-1: none) — PolicyState::rows_applied.
  std::vector<int64_t> rows_applied_;
  // Takes an accepted push's rows: those of async tables applied now
  // (unless its rows_applied_ says they are in already), the others added
  // to row_sums_.
  void TakeRows(int rank, uint64_t clock, absl::Span<const RowGrads> rows);
  // Adds `rows` to row_sums_.
  void AddRows(absl::Span<const RowGrads> rows);
  void ClearRows();
  // Sum of this round's gradients, by local chunk, in double: finite
  // float gradients never overflow it (two of 3e38 sum to 6e38). Used
  // from a chunk's second gradient when more follow (AddGradient);
  // allocated then.
  std::vector<std::vector<double>> sum_;
  // The round's mean, rounded to float once, for the optimizer; before
  // that, the chunk's first gradient.
  std::vector<std::vector<float>> mean_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_POLICY_SYNC_RULE_H_
