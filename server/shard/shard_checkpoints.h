// ShardCheckpoints: one shard's checkpoints in checkpoint.dir
// (server/checkpoint/checkpointer.h). When the shard starts it discards
// them or restores the newest valid one into the shard's policy and job
// metrics; afterwards a writer thread of its own writes the policy's
// captures, one at a time, so a push that crossed a checkpoint interval
// hands its capture over and is answered without waiting for the disk. It
// saves the epoch reports beside them, and says the newest's path,
// version and age for the status RPC. Thread-safe.
//
// With checkpoint.full_every K > 1, after each full checkpoint written the
// policy captures incrementally (UpdatePolicy::SetCaptureBase) until K - 1
// deltas are written; then the next capture is full again. A failed write
// changes nothing: the deltas go on from the last full one on disk.
//
// Lock order: queue_mu_ is never held while another lock is taken.
// write_mu_ is taken with no other lock held (policy captures are copies
// made under the policy's lock and handed over after it) and is held while
// the checkpointer writes files; under it, the job metrics' lock (to read
// the reports a checkpoint carries), the policy's (to set the capture
// base) and mu_ (the newest checkpoint, which the status RPC reads without
// waiting for a write).
#ifndef PARAMD_SERVER_SHARD_SHARD_CHECKPOINTS_H_
#define PARAMD_SERVER_SHARD_SHARD_CHECKPOINTS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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
#include "server/stats/job_metrics.h"

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

  // Writes what is still waiting for the writer, then stops it.
  ~ShardCheckpoints();

  // Writes `state` (a policy capture) with the job metrics' reports and
  // returns its path; a capture older than the newest written returns that
  // one's path. A failure is logged and returned: the previous checkpoints
  // are intact.
  absl::StatusOr<std::string> Write(PolicyState state);

  // Hands `state` to the writer thread and returns at once. A capture
  // still waiting when a newer one comes is dropped (the newer covers it;
  // logged), so a slow disk costs checkpoints, never pushes.
  void Submit(PolicyState state) ABSL_LOCKS_EXCLUDED(queue_mu_);
  // Returns once every capture submitted before the call is written (or
  // its write failed).
  void Flush() ABSL_LOCKS_EXCLUDED(queue_mu_);

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
  CheckpointState ToCheckpoint(PolicyState state) const;
  // After a checkpoint written: whether the next captures are deltas.
  void ChooseNextCaptures(bool incremental, uint64_t version,
                          std::vector<int64_t> table_clocks)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Records `path` at `version` as the newest.
  void SetNewest(const std::string& path, uint64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The writer thread: writes each submitted capture until stopped.
  void WriteSubmitted() ABSL_LOCKS_EXCLUDED(queue_mu_);

  // Constant after construction.
  const std::string job_id_;
  const int shard_;
  const uint64_t plan_fingerprint_;
  Clock* const clock_;
  UpdatePolicy* const policy_;
  JobMetrics* const metrics_;
  std::string restored_from_;  // Set by Open, then constant.

  // One write at a time (a checkpoint, the reports), held while the files
  // are written.
  absl::Mutex write_mu_;
  Checkpointer checkpointer_ ABSL_GUARDED_BY(write_mu_);
  const int64_t full_every_;
  // Deltas written since the last full checkpoint.
  int64_t deltas_since_full_ ABSL_GUARDED_BY(write_mu_) = 0;

  // The newest checkpoint's path, version and time: the status RPC reads
  // them without waiting for a write.
  mutable absl::Mutex mu_;
  std::string path_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time time_ ABSL_GUARDED_BY(mu_);

  // What the writer thread has still to write.
  absl::Mutex queue_mu_;
  std::optional<PolicyState> submitted_ ABSL_GUARDED_BY(queue_mu_);
  bool writing_ ABSL_GUARDED_BY(queue_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread writer_;  // Started by Open once restored.
};

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_SHARD_CHECKPOINTS_H_
