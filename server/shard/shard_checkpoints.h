// ShardCheckpoints: one shard's checkpoints in checkpoint.dir
// (server/checkpoint/checkpointer.h). When the shard starts it discards
// them or restores the newest valid one into the shard's policy and job
// metrics; afterwards it writes one checkpoint at a time from the policy's
// captures, saves the epoch reports beside them, and says the newest's
// path, version and age for the status RPC. Thread-safe.
//
// Lock order: mu_ is taken with no other lock held (policy captures are
// copies made under the policy's lock and handed over after it), and the
// job metrics' lock is taken under it, to read the reports a checkpoint
// carries. It is held while the checkpointer writes files.
#ifndef PARAMD_SERVER_SHARD_SHARD_CHECKPOINTS_H_
#define PARAMD_SERVER_SHARD_SHARD_CHECKPOINTS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/config/job_config.h"
#include "proto/paramd.pb.h"
#include "server/checkpoint/checkpointer.h"
#include "server/checkpoint/file_system.h"
#include "server/policy/update_policy.h"
#include "server/shard/job_metrics.h"

namespace paramd {

class ShardCheckpoints {
 public:
  // Opens `config`'s checkpoint.dir for shard `shard` on `file_system`
  // (LocalFileSystem() when null): removes every checkpoint of the shard
  // when `fresh`, else restores the newest valid one into `policy` and
  // `metrics`, and asks the policy for a capture every
  // checkpoint.every_steps. An error names the shard and the file: every
  // checkpoint damaged, one of another job, plan or policy. `policy`,
  // `metrics`, `clock` and `file_system` must outlive this object.
  static absl::StatusOr<std::unique_ptr<ShardCheckpoints>> Open(
      const JobConfig& config, int shard, uint64_t plan_fingerprint,
      FileSystem* file_system, bool fresh, Clock* clock, UpdatePolicy* policy,
      JobMetrics* metrics);

  // Writes `state` (a policy capture) with the job metrics' reports and
  // returns its path; a capture older than the newest written returns that
  // one's path. A failure is logged and returned: the previous checkpoints
  // are intact.
  absl::StatusOr<std::string> Write(const PolicyState& state);

  // Saves the epoch reports (newer than any checkpoint); a failure is
  // logged: only a restart before the next checkpoint would lose them.
  void SaveReports();

  // The newest checkpoint's path, version and age at `now`, and the file
  // this process restored from.
  void FillStatus(absl::Time now, proto::ShardStatus* status) const;

 private:
  ShardCheckpoints(const JobConfig& config, int shard,
                   uint64_t plan_fingerprint, FileSystem* file_system,
                   Clock* clock, UpdatePolicy* policy, JobMetrics* metrics);
  // Restores the newest valid checkpoint, if any.
  absl::Status Restore();
  CheckpointState ToCheckpoint(const PolicyState& state) const;
  // Records `path` at `version` as the newest.
  void SetNewest(const std::string& path, uint64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::string job_id_;
  const int shard_;
  const uint64_t plan_fingerprint_;
  Clock* const clock_;
  UpdatePolicy* const policy_;
  JobMetrics* const metrics_;
  Checkpointer checkpointer_;
  std::string restored_from_;  // Set by Open, then constant.

  // One checkpoint written at a time; the newest's path, version and time.
  mutable absl::Mutex mu_;
  std::string path_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time time_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_SHARD_CHECKPOINTS_H_
