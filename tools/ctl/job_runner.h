// `paramctl run`: starts every server and worker of a job on this machine
// as child processes, streams their logs with a prefix, prints per-epoch
// progress from shard 0's status, restarts a process that dies (restart.max
// times, after restart.backoff_seconds doubling; a server from its newest
// checkpoint — in checkpoint.dir, or for a job that names none in a folder
// of the run's own, removed with it — unless checkpoint.enabled is false),
// and stops everything when the job ends, when a child fails past its
// restarts (naming it and why) or on Ctrl-C.
#ifndef PARAMD_TOOLS_CTL_JOB_RUNNER_H_
#define PARAMD_TOOLS_CTL_JOB_RUNNER_H_

#include <string>

namespace paramd {

struct RunOptions {
  std::string job_path;
  std::string summary_path;  // Empty: no summary file.
  std::string server_binary;
  std::string worker_binary;
  // The paramd Python package's folder, for worker.command (WorkerLaunch in
  // tools/ctl/worker_command.h); empty: none.
  std::string python_path;
  std::string log_level = "info";
  // Write the job token and a self-signed certificate the job's security
  // section names, where missing (tools/ctl/local_secrets.h).
  bool make_secrets = false;
  // With checkpoint.dir holding checkpoints of the job: continue from them
  // (resume) or discard them (fresh); a run with neither refuses to start.
  bool resume = false;
  bool fresh = false;
};

// Returns the process exit code: 0 when every worker finished, 1 on a
// failure, 130 when interrupted.
int RunJob(const RunOptions& options);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_JOB_RUNNER_H_
