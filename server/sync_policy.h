// SyncPolicy: bulk-synchronous parallel (BSP).
//
// Round t collects exactly one clock-t gradient from each of the job's
// workers; when the last arrives, their mean is applied in one optimizer
// step and version t+1 is published. A worker at clock c may read once the
// version is at least c, so a pull for version t+1 waits for every worker's
// clock-t push. Pushes for a past or future round, or a second push of a
// rank in the same round, are refused and change nothing.
//
// Thread-safe.
#ifndef PARAMD_SERVER_SYNC_POLICY_H_
#define PARAMD_SERVER_SYNC_POLICY_H_

#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/update_policy.h"

namespace paramd {

class SyncPolicy : public UpdatePolicy {
 public:
  // `store` must outlive the policy.
  SyncPolicy(int num_workers, ShardStore* store);

  const char* name() const override { return "sync"; }
  uint64_t OnRegister(int rank) override;
  absl::Status Push(int rank, uint64_t clock,
                    absl::Span<const absl::Span<const float>> grads) override;
  absl::Status WaitReadable(int rank, uint64_t clock,
                            absl::Time deadline) override;
  void Shutdown() override;

 private:
  // Constant after construction.
  const int num_workers_;
  ShardStore* const store_;

  absl::Mutex mu_;
  uint64_t round_ ABSL_GUARDED_BY(mu_) = 0;  // == store_->version()
  std::vector<bool> pushed_ ABSL_GUARDED_BY(mu_);
  int num_pushed_ ABSL_GUARDED_BY(mu_) = 0;
  // Sum of this round's gradients, by local chunk.
  std::vector<std::vector<float>> sum_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_SYNC_POLICY_H_
