// Checkpointer: a shard's durable state in checkpoint.dir.
//
// A checkpoint holds the shard's parameters and optimizer slots (the
// store's SaveState), its version, every rank's clock and last accepted
// push (so a push retried across a restart is still applied once), and the
// job's fingerprint: job id plus partition-plan fingerprint. Files are
// named shard-K-vVERSION.ckpt (VERSION zero-padded, so names sort by
// version), written atomically (temporary file, fsync, rename, fsync of
// the folder) and end with a CRC-32 of everything before it. The newest
// `keep` are kept.
//
// An incremental checkpoint (checkpoint.full_every > 1) holds the store's
// changes since a full one, named in it by version: shard-K-vVERSION.delta
// beside the full ones' .ckpt. Deltas are differential — each on the
// newest full checkpoint before it, not on the delta before — so one
// damaged delta loses only itself. Save keeps the newest `keep` full
// checkpoints and the newest `keep` deltas that are no older than the
// oldest of those.
//
// Restore takes the newest checkpoint that reads back whole, a delta with
// the full checkpoint it names; a damaged one (torn, truncated, bad
// checksum, a delta whose full checkpoint is gone or damaged) is skipped,
// with a line saying so. One of another job or plan is an error naming
// both fingerprints. Checkpoints that exist but are all damaged are an
// error too: a shard never starts from scratch silently.
#ifndef PARAMD_SERVER_CHECKPOINT_CHECKPOINTER_H_
#define PARAMD_SERVER_CHECKPOINT_CHECKPOINTER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/checkpoint/file_system.h"

namespace paramd {

struct CheckpointState {
  std::string job_id;
  uint64_t plan_fingerprint = 0;
  int shard = 0;
  std::string policy;
  uint64_t version = 0;
  // By rank: the next clock each rank pushes, and the clock of the last
  // push accepted from it (-1: none since it joined).
  std::vector<uint64_t> clocks;
  std::vector<int64_t> last_accepted;
  // PolicyState::rows_applied (empty: none; format 3 on).
  std::vector<int64_t> rows_applied;
  std::string store_state;    // ShardStore::SaveState
  std::string metrics_state;  // JobMetrics::SaveState (epoch reports)
  // A delta: store_changes holds ShardStore::SaveChanges since the full
  // checkpoint at base_version (store_state is empty in the file; once
  // restored, it holds that full checkpoint's).
  bool incremental = false;
  uint64_t base_version = 0;
  std::string store_changes;
};

// The byte form, and back (DataLoss naming what is wrong).
std::string EncodeCheckpoint(const CheckpointState& state);
absl::StatusOr<CheckpointState> DecodeCheckpoint(absl::string_view bytes);

struct RestoredCheckpoint {
  std::optional<CheckpointState> state;  // None: no checkpoint exists.
  std::string path;                      // The one restored.
  std::string base_path;  // A delta's full checkpoint; empty otherwise.
  // Newer checkpoints skipped as damaged: "PATH: why".
  std::vector<std::string> skipped;
};

class Checkpointer {
 public:
  // `fs` must outlive the checkpointer.
  Checkpointer(FileSystem* fs, std::string dir, int shard, int keep);

  // Writes `state` atomically, then removes all but the newest `keep`.
  // On error no earlier checkpoint was removed or changed. Returns the
  // path written.
  absl::StatusOr<std::string> Save(const CheckpointState& state);

  // The newest checkpoint that reads back whole, checked against the job.
  absl::StatusOr<RestoredCheckpoint> LoadNewest(const std::string& job_id,
                                                uint64_t plan_fingerprint);

  // The job's epoch reports (JobMetrics::SaveState), kept beside the
  // checkpoints in shard-K.metrics and rewritten atomically on every
  // report, so that a restart loses none: they arrive between checkpoints.
  absl::Status SaveMetrics(absl::string_view metrics);
  // None when there is no metrics file; DataLoss when it is damaged.
  absl::StatusOr<std::optional<std::string>> LoadMetrics();

  // Removes every checkpoint and the metrics file of this shard (a fresh
  // start), and the folders of its tables' disk snapshots.
  absl::Status RemoveAll();

  // The folder of the disk snapshots (tables with storage: RowTable::Save)
  // of shard `shard`'s state at `version`, beside its checkpoint in `dir`.
  // Save removes those of versions below the one it writes that no kept
  // checkpoint holds.
  static std::string RowsPath(const std::string& dir, int shard,
                              uint64_t version);

  const std::string& dir() const { return dir_; }

 private:
  // This shard's checkpoint files, newest first (at one version, the full
  // one first).
  struct File {
    std::string path;
    uint64_t version = 0;
    bool delta = false;
  };
  absl::StatusOr<std::vector<File>> Existing();
  // Reads and checks one file of this shard.
  absl::StatusOr<CheckpointState> Read(const std::string& path);
  std::string PathFor(uint64_t version, bool delta = false) const;
  std::string MetricsPath() const;
  // Removes the snapshot folders (RowsPath) of versions below `below` not
  // in `kept`; all of them with below = UINT64_MAX and none kept.
  absl::Status RemoveRows(uint64_t below, const std::vector<uint64_t>& kept);

  FileSystem* const fs_;
  const std::string dir_;
  const int shard_;
  const int keep_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_CHECKPOINT_CHECKPOINTER_H_
