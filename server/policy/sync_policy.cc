#include "server/policy/sync_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace paramd {

SyncPolicy::SyncPolicy(int num_workers, ShardStore* store, int backup_workers)
    : UpdatePolicy(num_workers, store), backup_workers_(backup_workers) {
  absl::MutexLock lock(&mu_);
  round_ = store_->version();
  pushed_.assign(num_workers_, false);
  expected_from_.assign(num_workers_, round_);
  // sum_'s chunks are allocated when a round first has three gradients
  // (AddGradient).
  sum_.resize(store_->num_chunks());
  for (int i = 0; i < store_->num_chunks(); ++i) {
    mean_.emplace_back(store_->chunk_spec(i).length, 0.0f);
  }
  row_sums_.resize(store_->num_tables());
}

void SyncPolicy::AddRows(absl::Span<const RowGrads> rows) {
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
        if (!table.Holds(r.ids[i])) ++sums.fresh;
      }
      double* s = &sums.sums[static_cast<size_t>(it->second) * dim];
      const float* g = &r.values[i * dim];
      for (size_t j = 0; j < dim; ++j) s[j] += g[j];
    }
  }
}

void SyncPolicy::ClearRows() {
  for (RowSums& sums : row_sums_) {
    sums.at.clear();
    sums.ids.clear();
    sums.sums.clear();
    sums.fresh = 0;
  }
}

uint64_t SyncPolicy::JoinClock(int rank) const {
  return pushed_[rank] ? round_ + 1 : round_;
}

absl::Status SyncPolicy::CanJoinAt(int rank, uint64_t clock) {
  if (clock < JoinClock(rank)) {
    return absl::AbortedError(absl::StrCat(
        "Register: rank ", rank, " cannot join at clock ", clock,
        "; the sync round moved on to ", round_, " (register again)"));
  }
  expected_from_[rank] = clock;
  return absl::OkStatus();
}

void SyncPolicy::OnLeave(int /*rank*/) {
  MaybeFinishRound();
  PassRoundsNobodyTakes();
}

void SyncPolicy::CatchUp(uint64_t clock) {
  if (num_pushed_ > 0 || clock <= round_) return;
  round_ = clock;
  store_->AdvanceVersionTo(clock);
  for (uint64_t& from : expected_from_) from = std::max(from, round_);
}

void SyncPolicy::OnRestore() {
  ClearRows();
  round_ = store_->version();
  pushed_.assign(num_workers_, false);
  num_pushed_ = 0;
  num_summed_ = 0;
  mean_ready_ = false;
  for (int r = 0; r < num_workers_; ++r) {
    expected_from_[r] = round_;
    workers_[r].clock = std::min(workers_[r].clock, round_);
  }
}

void SyncPolicy::AdjustCapture(PolicyState* state) const {
  // The open round's pushes are not in the store: their ranks are back at
  // the round, and a retry of them is applied, not acknowledged.
  for (int r = 0; r < num_workers_; ++r) {
    if (!pushed_[r]) continue;
    state->clocks[r] = round_;
    state->last_accepted[r] = -1;
  }
}

// A rank joining at a later round than one it was expected in (a retried
// registration) no longer holds the current round.
void SyncPolicy::OnJoin(int /*rank*/) {
  MaybeFinishRound();
  PassRoundsNobodyTakes();
}

void SyncPolicy::PassRoundsNobodyTakes() {
  if (num_pushed_ > 0) return;
  uint64_t first = UINT64_MAX;
  for (int r = 0; r < num_workers_; ++r) {
    if (workers_[r].live) first = std::min(first, expected_from_[r]);
  }
  if (first != UINT64_MAX && first > round_) CatchUp(first);
}

absl::Status SyncPolicy::Accept(int rank, uint64_t clock,
                                uint64_t /*staleness*/,
                                absl::Span<const absl::Span<const float>> grads,
                                absl::Span<const RowGrads> rows, bool skip,
                                StepTimes* times) {
  if (backup_workers_ > 0 && clock < round_ && clock >= expected_from_[rank] &&
      clock >= workers_[rank].clock) {
    // Its round closed without it: acknowledged, never applied (a later
    // round's mean holds only gradients of that round's version). The
    // rank's pull is answered with the newest version, from which it
    // continues at a later clock.
    workers_[rank].clock = clock + 1;
    ++workers_[rank].dropped;
    return absl::OkStatus();
  }
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
  if (skip) {
    // In the round, without a gradient in its mean.
    pushed_[rank] = true;
    ++num_pushed_;
    workers_[rank].clock = clock + 1;
    MaybeFinishRound(times);
    return absl::OkStatus();
  }
  std::vector<uint64_t> pending_new;
  for (const RowSums& sums : row_sums_) pending_new.push_back(sums.fresh);
  RETURN_IF_ERROR(CheckRowRoom(
      rows,
      [this](uint32_t table, uint64_t id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return row_sums_[table].at.contains(id);
      },
      pending_new));
  AddRows(rows);
  pushed_[rank] = true;
  ++num_pushed_;
  ++num_summed_;
  workers_[rank].clock = clock + 1;
  AddGradient(grads, /*last=*/RoundComplete());
  MaybeFinishRound(times);
  return absl::OkStatus();
}

bool SyncPolicy::RoundComplete() const {
  if (num_pushed_ == 0) return false;
  int missing = 0;
  for (int r = 0; r < num_workers_; ++r) {
    if (Expected(r) && ++missing > backup_workers_) return false;
  }
  return true;
}

void SyncPolicy::AddGradient(absl::Span<const absl::Span<const float>> grads,
                             bool last) {
  // The round's k-th gradient (k = num_summed_, counted already). The sum
  // is in double, rounded to float once for the mean; how it is held
  // changes, not what is computed: the first gradient is kept as it came
  // (a float is exactly its double), the second and later add in double
  // into sum_, and the round's last one goes straight into the mean
  // instead of the sum, sparing a pass over sum_ and mean_ (for two
  // workers, sum_ is never touched).
  const int k = num_summed_;
  const double inverse = 1.0 / k;
  for (size_t c = 0; c < mean_.size(); ++c) {
    float* __restrict m = mean_[c].data();
    const float* __restrict g = grads[c].data();
    const size_t n = mean_[c].size();
    if (k == 1) {
      // The mean of one gradient is itself.
      std::copy(g, g + n, m);
      continue;
    }
    if (k == 2 && last) {
      for (size_t i = 0; i < n; ++i) {
        m[i] = static_cast<float>(
            (static_cast<double>(m[i]) + static_cast<double>(g[i])) * inverse);
      }
      continue;
    }
    if (k == 2) {
      sum_[c].resize(n);
      double* __restrict s = sum_[c].data();
      for (size_t i = 0; i < n; ++i) {
        s[i] = static_cast<double>(m[i]) + static_cast<double>(g[i]);
      }
      continue;
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
  mean_ready_ = last || k == 1;
}

void SyncPolicy::MaybeFinishRound(StepTimes* times) {
  if (!RoundComplete()) return;
  if (num_summed_ > 0) {
    ApplyMean(times);
  } else {
    // Every push of the round was skipped (guard.on_diverge: skip_push):
    // the version moves on without a step.
    store_->AdvanceVersionTo(round_ + 1);
  }
  ClearRows();
  ++round_;
  num_pushed_ = 0;
  num_summed_ = 0;
  mean_ready_ = false;
  std::fill(pushed_.begin(), pushed_.end(), false);
}

void SyncPolicy::ApplyMean(StepTimes* times) {
  // The mean, rounded once: for two workers exactly what summing in float
  // and halving gave, without its overflow. The push that completed the
  // round left it in mean_ already (AddGradient); a round completed
  // otherwise (a rank left, or the last push was skipped) with two or
  // more gradients has it in sum_.
  const double inverse = 1.0 / num_summed_;
  if (!mean_ready_) {
    for (size_t c = 0; c < sum_.size(); ++c) {
      const double* __restrict s = sum_[c].data();
      float* __restrict m = mean_[c].data();
      for (size_t i = 0; i < sum_[c].size(); ++i) {
        m[i] = static_cast<float>(s[i] * inverse);
      }
    }
  }
  // Rows as DDP averages them: the sum over the round's pushes divided by
  // the number of pushes, also for rows only some workers pushed.
  std::vector<RowGrads> rows;
  for (size_t t = 0; t < row_sums_.size(); ++t) {
    RowSums& sums = row_sums_[t];
    if (sums.ids.empty()) continue;
    sums.mean.resize(sums.sums.size());
    for (size_t i = 0; i < sums.sums.size(); ++i) {
      sums.mean[i] = static_cast<float>(sums.sums[i] * inverse);
    }
    rows.push_back(RowGrads{static_cast<uint32_t>(t), sums.ids, sums.mean});
  }
  std::vector<absl::Span<const float>> views(mean_.begin(), mean_.end());
  store_->ApplyStep(views, 1.0f, rows, times);
}

bool SyncPolicy::Readable(int /*rank*/, uint64_t clock) const {
  return round_ >= clock;
}

std::vector<int> SyncPolicy::Awaited(int /*rank*/, uint64_t /*clock*/) const {
  return LiveRanks([this](int r)
                       ABSL_NO_THREAD_SAFETY_ANALYSIS { return Expected(r); });
}

std::string SyncPolicy::Describe(int rank, uint64_t clock) const {
  const std::vector<int> missing = Awaited(rank, clock);
  if (backup_workers_ > 0) {
    const int more =
        std::max<int>(1, static_cast<int>(missing.size()) - backup_workers_);
    return absl::StrCat("version ", clock, ": round ", round_, " waits for ",
                        more, " more push(es) of rank(s) ", RankList(missing),
                        " to clock ", round_, " (policy.backup_workers ",
                        backup_workers_, ")");
  }
  return absl::StrCat("version ", clock, ": round ", round_,
                      " waits for rank(s) ", RankList(missing),
                      " to push clock ", round_);
}

}  // namespace paramd
