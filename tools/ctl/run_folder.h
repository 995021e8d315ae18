// The folders of one `paramctl run`. RunFolder: its own (paramd-run-XXXXXX
// under the system's temporary folder) for the servers' port files and the
// checkpoints of a job that names no checkpoint.dir; it goes when the run
// ends, and one left behind by a paramctl that was killed — its pid file
// names a process that is gone — is removed by the next run that starts.
// CheckCheckpointDir: whether the job's checkpoint.dir lets the run start.
#ifndef PARAMD_TOOLS_CTL_RUN_FOLDER_H_
#define PARAMD_TOOLS_CTL_RUN_FOLDER_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"

namespace paramd {

class RunFolder {
 public:
  // Removes stale run folders under `parent` (SweepStaleRunFolders), then
  // creates this run's, holding this process's pid.
  static absl::StatusOr<std::unique_ptr<RunFolder>> Create(
      const std::string& parent = "/tmp");
  // Removes the folder and everything in it.
  ~RunFolder();
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  const std::string& path() const { return path_; }
  // Where server `shard` writes the port it listens on.
  std::string PortFile(int shard) const;
  // Where the servers checkpoint when the job names no checkpoint.dir.
  std::string CheckpointDir() const;
  // The port server `shard` wrote, or 0 before it did.
  int ReadPort(int shard) const;
  // How many stale folders Create removed.
  int swept() const { return swept_; }

 private:
  RunFolder(std::string path, int swept)
      : path_(std::move(path)), swept_(swept) {}

  const std::string path_;
  const int swept_;
};

// Removes every folder under `parent` named paramd-run-* whose pid file
// names a process that no longer exists (one without a pid file may be a
// run starting up: kept); returns how many it removed.
int SweepStaleRunFolders(const std::string& parent);

// Whether the run may start given what checkpoint.dir holds: checkpoints
// of an earlier run need --resume (continue) or --fresh (discard them);
// --resume needs some; both need checkpoint.dir.
absl::Status CheckCheckpointDir(const JobConfig& config, bool resume,
                                bool fresh);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_RUN_FOLDER_H_
