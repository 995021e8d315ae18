#include "server/guards/gradient_guard.h"

#include <spdlog/spdlog.h>

#include <cmath>

#include "absl/strings/str_format.h"

namespace paramd {
namespace {

// The newest loss's weight in a rank's running mean.
constexpr double kMeanWeight = 1.0 / 16;

double SquaredSum(absl::Span<const float> values) {
  double sum = 0;
  for (float v : values) sum += static_cast<double>(v) * v;
  return sum;
}

}  // namespace

GradientGuard::GradientGuard(const JobConfig& config, int shard,
                             const ShardStore* store)
    : clip_norm_(config.optimizer.clip_norm),
      config_(config.guard),
      shard_(shard),
      store_(store),
      ranks_(config.num_workers) {}

bool GradientGuard::Clip(absl::Span<const absl::Span<const float>> chunks,
                         absl::Span<const RowGrads> rows, Clipped* out) const {
  if (clip_norm_ <= 0) return false;
  double squares = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (!store_->is_statistic(static_cast<int>(c))) {
      squares += SquaredSum(chunks[c]);
    }
  }
  for (const RowGrads& r : rows) squares += SquaredSum(r.values);
  const double norm = std::sqrt(squares);
  if (!(norm > clip_norm_)) return false;
  const float scale = static_cast<float>(clip_norm_ / norm);
  out->chunks.assign(chunks.begin(), chunks.end());
  out->rows.assign(rows.begin(), rows.end());
  // Reserved up front: the spans point into it.
  out->storage.reserve(chunks.size() + rows.size());
  auto scaled = [&](absl::Span<const float> from) {
    std::vector<float>& to =
        out->storage.emplace_back(from.begin(), from.end());
    for (float& v : to) v *= scale;
    return absl::Span<const float>(to);
  };
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (!store_->is_statistic(static_cast<int>(c))) {
      out->chunks[c] = scaled(chunks[c]);
    }
  }
  for (RowGrads& r : out->rows) r.values = scaled(r.values);
  return true;
}

absl::StatusOr<GradientGuard::Verdict> GradientGuard::Judge(int rank,
                                                            uint64_t clock,
                                                            float loss) {
  Verdict v;
  if (!config_.enabled) return v;
  v.watched = true;
  absl::MutexLock lock(&mu_);
  if (!stopped_.empty()) return absl::FailedPreconditionError(stopped_);
  const Rank& r = ranks_[rank];
  const bool finite = std::isfinite(loss);
  const bool armed = r.losses >= static_cast<uint64_t>(config_.warmup_pushes);
  if (finite && !(armed && loss > config_.loss_spike * r.mean)) return v;
  v.diverges = true;
  v.skip = config_.on_diverge == OnDiverge::kSkipPush;
  v.what = finite ? absl::StrFormat(
                        "loss %.4g is %.1fx its running mean %.4g "
                        "(guard.loss_spike %g)",
                        loss, loss / r.mean, r.mean, config_.loss_spike)
                  : absl::StrFormat("loss %g is not finite", loss);
  if (config_.on_diverge != OnDiverge::kStop) return v;
  // Refused, and the job with it: counted now.
  ++ranks_[rank].divergences;
  ++divergences_;
  spdlog::warn(
      "shard {}: rank {} diverges at clock {}: {}; guard.on_diverge stop: "
      "the job's pushes are refused from now on",
      shard_, rank, clock, v.what);
  stopped_ = absl::StrFormat(
      "Push: the job was stopped by its guard (on_diverge: stop): rank %d at "
      "clock %d: %s",
      rank, clock, v.what);
  return absl::FailedPreconditionError(stopped_);
}

void GradientGuard::Record(int rank, uint64_t clock, float loss,
                           const Verdict& verdict) {
  if (!verdict.watched) return;
  absl::MutexLock lock(&mu_);
  Rank& r = ranks_[rank];
  if (!verdict.diverges) {
    r.mean = r.losses == 0 ? loss : r.mean + kMeanWeight * (loss - r.mean);
    ++r.losses;
    return;
  }
  // A divergence: its loss stays out of the mean.
  ++r.divergences;
  ++divergences_;
  spdlog::warn("shard {}: rank {} diverges at clock {}: {}{}", shard_, rank,
               clock, verdict.what,
               verdict.skip
                   ? "; guard.on_diverge skip_push: the push is not applied"
                   : "");
}

void GradientGuard::CountClipped(int rank) {
  absl::MutexLock lock(&mu_);
  ++clipped_;
  ++ranks_[rank].clipped;
}

void GradientGuard::FillStatus(proto::ShardStatus* status) const {
  absl::MutexLock lock(&mu_);
  status->set_clipped_pushes(clipped_);
  status->set_divergences(divergences_);
  status->set_guard_stopped(stopped_);
  for (int i = 0; i < status->workers_size(); ++i) {
    proto::WorkerStatus* w = status->mutable_workers(i);
    if (w->rank() >= ranks_.size()) continue;
    const Rank& r = ranks_[w->rank()];
    w->set_clipped_pushes(r.clipped);
    w->set_divergences(r.divergences);
    w->set_mean_loss(r.mean);
  }
}

}  // namespace paramd
