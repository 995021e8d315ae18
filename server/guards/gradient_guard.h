// GradientGuard: a shard's guards on the pushes it takes, before they reach
// the policy.
//
// Clipping (optimizer.clip_norm): a push whose gradient's L2 norm — over
// the trainable chunks and the embedding rows this shard receives, layer
// statistics apart — exceeds the bound is scaled down to it (copied; the
// wire's buffers stay as they came). With several shards each clips its
// own part of a step, so a step's norm over the whole model is at most
// clip_norm x sqrt(shards).
//
// Divergence watch (the `guard` section): per rank, a running mean of its
// pushes' batch losses (exponential, weight 1/16 for the newest, counted
// once warmup_pushes losses are in); a push whose loss is not finite or
// above loss_spike x that mean is a divergence — logged naming the rank,
// its loss and mean, counted in status and metrics; with on_diverge:
// skip_push that push is acknowledged and not applied (the policy leaves
// its gradient out); with on_diverge: stop that push and every later one
// of the job are refused (FAILED_PRECONDITION, naming the first
// divergence). Thread-safe.
#ifndef PARAMD_SERVER_GUARDS_GRADIENT_GUARD_H_
#define PARAMD_SERVER_GUARDS_GRADIENT_GUARD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/config/job_config.h"
#include "proto/paramd.pb.h"
#include "server/store/shard_store.h"

namespace paramd {

class GradientGuard {
 public:
  // `store` (for which chunks are statistics) must outlive the guard.
  GradientGuard(const JobConfig& config, int shard, const ShardStore* store);

  // A clipped push: scaled copies of its chunks and rows (spans into
  // `storage`), to hand to the policy instead.
  struct Clipped {
    std::vector<absl::Span<const float>> chunks;
    std::vector<RowGrads> rows;
    std::vector<std::vector<float>> storage;
  };
  // `chunks` by local index, `rows` as the policy takes them. False (and
  // `out` untouched, nothing copied) when the push stands as it came:
  // clipping off, or its norm within clip_norm.
  bool Clip(absl::Span<const absl::Span<const float>> chunks,
            absl::Span<const RowGrads> rows, Clipped* out) const;

  // Whether Judge looks at pushes (a `guard` section).
  bool watching() const { return config_.enabled; }

  // What the watch makes of a push's loss.
  struct Verdict {
    bool watched = false;   // Judged (a guard section; not a retry).
    bool diverges = false;  // Not finite, or a spike.
    bool skip = false;      // Diverges under on_diverge: skip_push.
    std::string what;       // Why it diverges.
  };
  // Judges a push's loss before it is applied, changing nothing but this:
  // FAILED_PRECONDITION when the job is stopped (this push's divergence
  // under on_diverge: stop, or an earlier one). Call for pushes that are
  // not retries.
  absl::StatusOr<Verdict> Judge(int rank, uint64_t clock, float loss)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The judged push was accepted (not a duplicate): its loss joins the
  // rank's running mean, or its divergence is counted and logged. A push
  // the policy refused is not recorded, so its resend is judged afresh.
  void Record(int rank, uint64_t clock, float loss, const Verdict& verdict)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A clipped push of `rank` was applied.
  void CountClipped(int rank) ABSL_LOCKS_EXCLUDED(mu_);

  // clipped_pushes, divergences, guard_stopped (ShardStatus) and each
  // rank's (WorkerStatus: clipped_pushes, divergences, mean_loss; the rows
  // must be filled).
  void FillStatus(proto::ShardStatus* status) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Rank {
    uint64_t losses = 0;  // Finite losses seen.
    double mean = 0;
    uint64_t divergences = 0;
    uint64_t clipped = 0;
  };

  const double clip_norm_;
  const GuardConfig config_;
  const int shard_;
  const ShardStore* const store_;

  mutable absl::Mutex mu_;
  std::vector<Rank> ranks_ ABSL_GUARDED_BY(mu_);
  uint64_t clipped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t divergences_ ABSL_GUARDED_BY(mu_) = 0;
  std::string stopped_ ABSL_GUARDED_BY(mu_);  // Why, once stopped.
};

}  // namespace paramd

#endif  // PARAMD_SERVER_GUARDS_GRADIENT_GUARD_H_
