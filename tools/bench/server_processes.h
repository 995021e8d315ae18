// ServerProcesses: the paramd-server processes of one job, for a bench or
// the load test: one per shard, each listening on a port of its own
// choosing (port 0) that it writes to a port file — on this host, or on
// other hosts through a launcher (RemoteHosts: scripts/hosts.sh's
// simulated hosts share this one's files, so the port file still comes
// back). Start returns once every
// one listens. Their output goes through a Supervisor (tools/ctl/
// supervisor.h), which the caller drives with Poll while they run; the
// destructor stops them (SIGTERM, then SIGKILL).
#ifndef PARAMD_TOOLS_BENCH_SERVER_PROCESSES_H_
#define PARAMD_TOOLS_BENCH_SERVER_PROCESSES_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/flags.h"
#include "tools/ctl/supervisor.h"

namespace paramd {

// Processes on other hosts: the one of index I on host I % hosts.size(),
// started through `launch` with "{host}" replaced by that host's index in
// `hosts` and "{addr}" by its address (e.g. "scripts/hosts.sh run SET
// {host}"), the process's command line after it. Servers (shard K on host
// K % N, listening at its address) and paramd-bench's workers (rank R).
struct RemoteHosts {
  std::vector<std::string> hosts;
  std::vector<std::string> launch;  // Words.

  bool empty() const { return hosts.empty(); }
  // The address of the host of process `index`.
  const std::string& host(int index) const {
    return hosts[index % static_cast<int>(hosts.size())];
  }
  // `command` started on the host of process `index`: launch's words
  // first.
  std::vector<std::string> Launch(int index,
                                  std::vector<std::string> command) const;
};

// --ROLE_hosts A,B,... and --ROLE_launch 'PREFIX {host}' (together, or
// neither: no hosts), e.g. ROLE "server" as paramd-bench and paramd-load
// take them; an error names the flags.
absl::StatusOr<RemoteHosts> RemoteHostsFromFlags(const ParsedFlags& flags,
                                                 const std::string& role);

class ServerProcesses {
 public:
  // Starts `binary` for every shard of the job file `job_path`, with port
  // files in `dir` named after `tag`, on `where`'s hosts when given (else
  // on 127.0.0.1); fails naming the server that exited or did not listen
  // within `timeout`.
  static absl::StatusOr<std::unique_ptr<ServerProcesses>> Start(
      const std::string& binary, const std::string& job_path, int shards,
      const std::string& dir, const std::string& tag,
      absl::Duration timeout = absl::Seconds(60),
      const RemoteHosts* where = nullptr);
  ~ServerProcesses();

  // "HOST:PORT", by shard.
  const std::vector<std::string>& addresses() const { return addresses_; }
  pid_t pid(int shard) const { return supervisor_.child(child_[shard]).pid; }
  // SIGKILLs shard `shard`'s server, waits for it, and starts it again at
  // its address (restoring from the job's checkpoints, if any; it logs at
  // info, so that its restore shows); returns the new process's pid. Other children that exit meanwhile are
  // reported by the next Poll.
  absl::StatusOr<pid_t> Restart(int shard);
  // The largest peak RSS of the servers killed by Restart (-1: none).
  int64_t killed_peak_rss() const { return killed_peak_rss_; }
  // Lets their output flow for up to `timeout`; returns the shards whose
  // server exited meanwhile.
  std::vector<int> Poll(absl::Duration timeout);
  Supervisor& supervisor() { return supervisor_; }

 private:
  ServerProcesses() = default;

  Supervisor supervisor_;
  std::vector<std::string> addresses_;
  std::string binary_, job_path_;
  std::vector<int> child_;  // The supervisor's index of each shard's server.
  int64_t killed_peak_rss_ = -1;
  std::vector<int> exited_;  // Seen by Restart, for the next Poll.
};

}  // namespace paramd

#endif  // PARAMD_TOOLS_BENCH_SERVER_PROCESSES_H_
