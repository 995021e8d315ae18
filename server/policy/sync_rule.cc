#include "server/policy/sync_rule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace paramd {

namespace {

// 0, 1, ..., n - 1: every chunk of a whole push.
std::vector<int> AllChunks(int n) {
  std::vector<int> out(n);
  for (int c = 0; c < n; ++c) out[c] = c;
  return out;
}

}  // namespace

SyncRule::SyncRule(int num_workers, ShardStore* store, int backup_workers)
    : num_workers_(num_workers),
      store_(store),
      backup_workers_(backup_workers),
      num_chunks_(store->num_chunks()),
      all_chunks_(AllChunks(store->num_chunks())) {
  round_ = store_->version();
  pushed_.assign(num_workers_, false);
  chunks_in_.assign(num_workers_, 0);
  expected_from_.assign(num_workers_, round_);
  has_.assign(static_cast<size_t>(num_chunks_) * num_workers_, 0);
  count_.assign(num_chunks_, 0);
  summed_.assign(num_chunks_, 0);
  mean_ready_.assign(num_chunks_, 0);
  committed_.assign(num_chunks_, 0);
  // sum_'s chunks are allocated when a chunk first has three gradients
  // (AddGradient).
  sum_.resize(num_chunks_);
  for (int i = 0; i < num_chunks_; ++i) {
    mean_.emplace_back(store_->chunk_spec(i).length, 0.0f);
  }
  row_sums_.resize(store_->num_tables());
  rows_applied_.assign(num_workers_, -1);
}

void SyncRule::TakeRows(int rank, uint64_t clock,
                        absl::Span<const RowGrads> rows) {
  std::vector<RowGrads> now, round;
  for (const RowGrads& r : rows) {
    (store_->table(r.table).config().async() ? now : round).push_back(r);
  }
  AddRows(round);
  if (now.empty()) return;
  if (rows_applied_[rank] != static_cast<int64_t>(clock)) {
    store_->ApplyRows(now, 1.0f);
  }
  rows_applied_[rank] = static_cast<int64_t>(clock);
}

void SyncRule::AddRows(absl::Span<const RowGrads> rows) {
  for (const RowGrads& r : rows) {
    RowSums& sums = row_sums_[r.table];
    const RowTable& table = store_->table(r.table);
    const size_t dim = table.dim();
    for (size_t i = 0; i < r.ids.size(); ++i) {
      auto [it, added] =
          sums.at.emplace(r.ids[i], static_cast<uint32_t>(sums.ids.size()));
      if (added) {
        sums.ids.push_back(r.ids[i]);
        sums.sums.resize(sums.sums.size() + dim, 0.0);
        // Counted for max_rows (CheckRowRoom); a table with storage has
        // none, and telling its new rows would read the disk.
        if (table.limits_rows() && !table.Holds(r.ids[i])) ++sums.fresh;
      }
      double* s = &sums.sums[static_cast<size_t>(it->second) * dim];
      const float* g = &r.values[i * dim];
      for (size_t j = 0; j < dim; ++j) s[j] += g[j];
    }
  }
}

void SyncRule::ClearRows() {
  for (RowSums& sums : row_sums_) {
    sums.at.clear();
    sums.ids.clear();
    sums.sums.clear();
    sums.fresh = 0;
  }
}

uint64_t SyncRule::JoinClock(const RankTable& /*ranks*/, int rank) const {
  // A rank whose push is (partly) in, or that joins after chunks of the
  // round were stepped without it, takes part from the next round.
  return pushed_[rank] || chunks_in_[rank] > 0 || num_committed_ > 0
             ? round_ + 1
             : round_;
}

absl::Status SyncRule::Admit(const RankTable& ranks, int rank, uint64_t clock) {
  if (clock < JoinClock(ranks, rank)) {
    return absl::AbortedError(absl::StrCat(
        "Register: rank ", rank, " cannot join at clock ", clock,
        "; the sync round moved on to ", round_, " (register again)"));
  }
  expected_from_[rank] = clock;
  return absl::OkStatus();
}

void SyncRule::MembersChanged(const RankTable& ranks) {
  MaybeFinishRound(ranks);
  PassRoundsNobodyTakes(ranks);
}

void SyncRule::CatchUp(uint64_t clock) {
  if (num_pushed_ > 0 || clock <= round_) return;
  round_ = clock;
  store_->AdvanceVersionTo(clock);
  for (uint64_t& from : expected_from_) from = std::max(from, round_);
}

void SyncRule::Restored(const PolicyState& state, RankTable* ranks) {
  ClearRows();
  round_ = store_->version();
  NextRound();
  for (int r = 0; r < num_workers_; ++r) {
    expected_from_[r] = round_;
    ranks->SetClock(r, std::min((*ranks)[r].clock, round_));
    // Only a push of the restored round can still come.
    if (static_cast<size_t>(r) < state.rows_applied.size() &&
        state.rows_applied[r] == static_cast<int64_t>(round_)) {
      rows_applied_[r] = state.rows_applied[r];
    }
  }
}

void SyncRule::NextRound() {
  num_pushed_ = 0;
  num_summed_ = 0;
  num_committed_ = 0;
  std::fill(pushed_.begin(), pushed_.end(), false);
  std::fill(chunks_in_.begin(), chunks_in_.end(), 0);
  std::fill(has_.begin(), has_.end(), 0);
  std::fill(count_.begin(), count_.end(), 0);
  std::fill(summed_.begin(), summed_.end(), 0);
  std::fill(mean_ready_.begin(), mean_ready_.end(), 0);
  std::fill(committed_.begin(), committed_.end(), 0);
  std::fill(rows_applied_.begin(), rows_applied_.end(), -1);
}

void SyncRule::AdjustCapture(PolicyState* state) const {
  // The open round's pushes are not in the store: their ranks are back at
  // the round, and a retry of them is applied, not acknowledged.
  for (int r = 0; r < num_workers_; ++r) {
    if (!pushed_[r] && chunks_in_[r] == 0) continue;
    state->clocks[r] = round_;
    state->last_accepted[r] = -1;
  }
  // Their rows of async tables are in the store: a retry brings the rest.
  // (A restored push not retried yet stays named.)
  if (std::any_of(rows_applied_.begin(), rows_applied_.end(),
                  [](int64_t c) { return c >= 0; })) {
    state->rows_applied = rows_applied_;
  }
}

void SyncRule::PassRoundsNobodyTakes(const RankTable& ranks) {
  if (num_pushed_ > 0) return;
  uint64_t first = UINT64_MAX;
  for (int r = 0; r < num_workers_; ++r) {
    if (ranks[r].live) first = std::min(first, expected_from_[r]);
  }
  if (first != UINT64_MAX && first > round_) CatchUp(first);
}

absl::Status SyncRule::CheckRound(int rank, uint64_t clock) const {
  if (clock != round_ || clock < expected_from_[rank]) {
    return absl::FailedPreconditionError(
        absl::StrCat("Push: rank ", rank, " sent a gradient for clock ", clock,
                     " but the sync round is ", round_,
                     clock < round_ ? " (that round is already applied)"
                                    : " (pull the current version first)"));
  }
  if (pushed_[rank]) {
    return absl::AlreadyExistsError(absl::StrCat(
        "Push: rank ", rank, " already pushed its gradient for clock ", clock));
  }
  return absl::OkStatus();
}

absl::Status SyncRule::Accept(const RankTable& ranks, const RulePush& push,
                              bool* dropped) {
  const int rank = push.rank;
  const uint64_t clock = push.clock;
  *dropped = backup_workers_ > 0 && clock < round_ &&
             clock >= expected_from_[rank] && clock >= ranks[rank].clock;
  // Its round closed without it: acknowledged, never applied (a later
  // round's mean holds only gradients of that round's version). The
  // rank's pull is answered with the newest version, from which it
  // continues at a later clock.
  if (*dropped) return absl::OkStatus();
  RETURN_IF_ERROR(CheckRound(rank, clock));
  // Skipped (guard.on_diverge: skip_push): in the round, without a
  // gradient in its mean.
  if (!push.skip && !push.rows.empty()) {
    std::vector<uint64_t> pending_new;
    for (const RowSums& sums : row_sums_) pending_new.push_back(sums.fresh);
    RETURN_IF_ERROR(store_->CheckRowRoom(
        push.rows,
        [this](uint32_t table, uint64_t id) {
          return row_sums_[table].at.contains(id);
        },
        pending_new));
    TakeRows(rank, clock, push.rows);
  }
  if (!push.skip) ++num_summed_;
  bool complete = false, duplicate = false;
  AddChunks(ranks, rank, all_chunks_, push.grads, push.skip, &complete,
            &duplicate);
  MaybeFinishRound(ranks, push.times);
  return absl::OkStatus();
}

absl::Status SyncRule::AcceptChunks(const RankTable& ranks,
                                    const RulePush& push,
                                    absl::Span<const int> locals,
                                    bool* complete, bool* duplicate) {
  const int rank = push.rank;
  const uint64_t clock = push.clock;
  if (backup_workers_ > 0) {
    return absl::FailedPreconditionError(
        "Push: a push in slices needs policy.backup_workers 0; send it whole");
  }
  RETURN_IF_ERROR(CheckRound(rank, clock));
  for (int c : locals) {
    if (committed_[c] && !Has(c, rank)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Push: rank ", rank, " sent chunk ", c, " of clock ", clock,
          ", which the round already stepped without it (register again)"));
    }
  }
  AddChunks(ranks, rank, locals, push.grads, /*skip=*/false, complete,
            duplicate);
  if (*complete) ++num_summed_;
  MaybeFinishRound(ranks);
  return absl::OkStatus();
}

void SyncRule::AddChunks(const RankTable& ranks, int rank,
                         absl::Span<const int> locals,
                         absl::Span<const absl::Span<const float>> grads,
                         bool skip, bool* complete, bool* duplicate) {
  if (!pushed_[rank] && chunks_in_[rank] == 0) ++num_pushed_;
  *duplicate = true;
  for (int c : locals) {
    if (Has(c, rank)) continue;
    *duplicate = false;
    has_[static_cast<size_t>(c) * num_workers_ + rank] = 1;
    ++count_[c];
    ++chunks_in_[rank];
    if (skip) continue;
    ++summed_[c];
    AddGradient(c, grads[c], /*last=*/ChunkComplete(ranks, c));
  }
  *complete = chunks_in_[rank] == num_chunks_;
  if (*complete) pushed_[rank] = true;
}

bool SyncRule::AnyPartPushed() const {
  for (int r = 0; r < num_workers_; ++r) {
    if (chunks_in_[r] > 0 && !pushed_[r]) return true;
  }
  return false;
}

bool SyncRule::RoundComplete(const RankTable& ranks) const {
  if (num_pushed_ == 0) return false;
  int missing = 0;
  for (int r = 0; r < num_workers_; ++r) {
    if (Expected(ranks, r) && ++missing > backup_workers_) return false;
  }
  return true;
}

bool SyncRule::ChunkComplete(const RankTable& ranks, int c) const {
  if (count_[c] == 0) return false;
  int missing = 0;
  for (int r = 0; r < num_workers_; ++r) {
    if (Expected(ranks, r) && !Has(c, r) && ++missing > backup_workers_) {
      return false;
    }
  }
  return true;
}

void SyncRule::AddGradient(int c, absl::Span<const float> grad, bool last) {
  // The chunk's k-th gradient (k = summed_[c], counted already). The sum
  // is in double, rounded to float once for the mean; how it is held
  // changes, not what is computed: the first gradient is kept as it came
  // (a float is exactly its double), the second and later add in double
  // into sum_, and the chunk's last one goes straight into the mean
  // instead of the sum, sparing a pass over sum_ and mean_ (for two
  // workers, sum_ is never touched).
  const int k = summed_[c];
  const double inverse = 1.0 / k;
  float* __restrict m = mean_[c].data();
  const float* __restrict g = grad.data();
  const size_t n = mean_[c].size();
  mean_ready_[c] = last || k == 1;
  if (k == 1) {
    // The mean of one gradient is itself.
    std::copy(g, g + n, m);
    return;
  }
  if (k == 2 && last) {
    for (size_t i = 0; i < n; ++i) {
      m[i] = static_cast<float>(
          (static_cast<double>(m[i]) + static_cast<double>(g[i])) * inverse);
    }
    return;
  }
  if (k == 2) {
    sum_[c].resize(n);
    double* __restrict s = sum_[c].data();
    for (size_t i = 0; i < n; ++i) {
      s[i] = static_cast<double>(m[i]) + static_cast<double>(g[i]);
    }
    return;
  }
  double* __restrict s = sum_[c].data();
  if (last) {
    for (size_t i = 0; i < n; ++i) {
      m[i] = static_cast<float>((s[i] + static_cast<double>(g[i])) * inverse);
    }
  } else {
    for (size_t i = 0; i < n; ++i) s[i] += g[i];
  }
}

void SyncRule::MakeMean(int c) {
  // A chunk completed otherwise than by a push (a rank left, or the last
  // push was skipped) with two or more gradients has them in sum_.
  if (mean_ready_[c]) return;
  const double inverse = 1.0 / summed_[c];
  const double* __restrict s = sum_[c].data();
  float* __restrict m = mean_[c].data();
  for (size_t i = 0; i < sum_[c].size(); ++i) {
    m[i] = static_cast<float>(s[i] * inverse);
  }
  mean_ready_[c] = 1;
}

void SyncRule::MaybeFinishRound(const RankTable& ranks, StepTimes* times) {
  const bool whole = RoundComplete(ranks);
  // Before the round is complete a chunk can be only where a rank's push
  // is partly in (a round in slices): with whole pushes every chunk
  // completes with the round.
  if (!whole && !AnyPartPushed()) return;
  std::vector<int> ready;
  for (int c = 0; c < num_chunks_; ++c) {
    if (!committed_[c] && (whole || ChunkComplete(ranks, c))) {
      ready.push_back(c);
    }
  }
  if (!whole) {
    // Chunks every expected rank pushed are stepped now (a round in
    // slices); the version waits for the rest.
    if (!ready.empty()) StepChunks(ready);
    return;
  }
  bool uniform = num_committed_ == 0;
  for (int c = 0; c < num_chunks_ && uniform; ++c) {
    uniform = summed_[c] == num_summed_;
  }
  if (uniform && num_summed_ > 0) {
    // Every push whole: one step.
    ApplyMean(times);
  } else if (uniform) {
    // Every push of the round was skipped (guard.on_diverge: skip_push):
    // the version moves on without a step.
    store_->AdvanceVersionTo(round_ + 1);
  } else {
    StepChunks(ready);
    store_->FinishChunkedStep(RowMeans());
  }
  ClearRows();
  ++round_;
  NextRound();
}

void SyncRule::StepChunks(const std::vector<int>& locals) {
  std::vector<int> stepped;
  for (int c : locals) {
    committed_[c] = 1;
    ++num_committed_;
    if (summed_[c] == 0) continue;
    MakeMean(c);
    stepped.push_back(c);
  }
  std::vector<absl::Span<const float>> views(mean_.begin(), mean_.end());
  store_->StepChunks(stepped, views, 1.0f);
}

std::vector<RowGrads> SyncRule::RowMeans() {
  // Rows as DDP averages them: the sum over the round's pushes divided by
  // the number of pushes, also for rows only some workers pushed.
  std::vector<RowGrads> rows;
  if (num_summed_ == 0) return rows;
  const double inverse = 1.0 / num_summed_;
  for (size_t t = 0; t < row_sums_.size(); ++t) {
    RowSums& sums = row_sums_[t];
    if (sums.ids.empty()) continue;
    sums.mean.resize(sums.sums.size());
    for (size_t i = 0; i < sums.sums.size(); ++i) {
      sums.mean[i] = static_cast<float>(sums.sums[i] * inverse);
    }
    rows.push_back(RowGrads{static_cast<uint32_t>(t), sums.ids, sums.mean});
  }
  return rows;
}

void SyncRule::ApplyMean(StepTimes* times) {
  // The mean, rounded once: for two workers exactly what summing in float
  // and halving gave, without its overflow. The push that completed the
  // round left it in mean_ already (AddGradient).
  for (int c = 0; c < num_chunks_; ++c) MakeMean(c);
  const std::vector<RowGrads> rows = RowMeans();
  std::vector<absl::Span<const float>> views(mean_.begin(), mean_.end());
  store_->ApplyStep(views, 1.0f, rows, times);
}

bool SyncRule::Readable(const RankTable& /*ranks*/, int /*rank*/,
                        uint64_t clock, absl::Span<const int> locals) const {
  // A read of chunks may come at version t+1 once the round stepped them.
  if (round_ >= clock) return true;
  if (locals.empty() || clock != round_ + 1) return false;
  for (int c : locals) {
    if (!committed_[c]) return false;
  }
  return true;
}

std::vector<int> SyncRule::Awaited(const RankTable& ranks, int /*rank*/,
                                   uint64_t /*clock*/) const {
  return ranks.Live([this, &ranks](int r) { return Expected(ranks, r); });
}

std::string SyncRule::Describe(const RankTable& ranks, int rank,
                               uint64_t clock) const {
  const std::vector<int> missing = Awaited(ranks, rank, clock);
  if (backup_workers_ > 0) {
    const int more =
        std::max<int>(1, static_cast<int>(missing.size()) - backup_workers_);
    return absl::StrCat("version ", clock, ": round ", round_, " waits for ",
                        more, " more push(es) of rank(s) ",
                        RankTable::List(missing), " to clock ", round_,
                        " (policy.backup_workers ", backup_workers_, ")");
  }
  return absl::StrCat("version ", clock, ": round ", round_,
                      " waits for rank(s) ", RankTable::List(missing),
                      " to push clock ", round_);
}

}  // namespace paramd
