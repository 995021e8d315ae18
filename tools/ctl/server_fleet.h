// ServerFleet: the server processes of one paramctl run and where they
// listen — a primary per shard, and with replication.factor 2 a backup per
// shard (slots num_shards .. 2 × num_shards - 1). It builds each one's
// command line (a backup with --backup; each told the other replica's
// address once known), learns the ports they bound from their port files,
// and picks, from a round of status calls, the replica that serves each
// shard now.
#ifndef PARAMD_TOOLS_CTL_SERVER_FLEET_H_
#define PARAMD_TOOLS_CTL_SERVER_FLEET_H_

#include <string>
#include <vector>

#include "common/config/job_config.h"
#include "tools/ctl/run_folder.h"
#include "tools/ctl/status_format.h"

namespace paramd {

class ServerFleet {
 public:
  struct Launch {
    std::string job_path;
    std::string server_binary;
    std::string launch;
    std::string log_level;
    // Passed as --checkpoint_dir when not empty.
    std::string checkpoint_dir;
    // Passed as --etcd when not empty (a local coordinator's endpoint).
    std::string etcd;
  };

  // `config` and `folder` outlive this.
  ServerFleet(const JobConfig& config, const RunFolder* folder, Launch launch);

  int size() const { return static_cast<int>(addresses_.size()); }
  int num_shards() const { return config_.num_shards(); }
  bool is_backup(int slot) const { return slot >= num_shards(); }
  int shard_of(int slot) const { return slot % num_shards(); }
  // "server 1", "backup 1".
  std::string Name(int slot) const;
  // The command line of slot `slot`; `fresh`: discard checkpoints.
  std::vector<std::string> Argv(int slot, bool fresh) const;

  // Reads the port file of every slot in [begin, end) whose address is not
  // known yet; returns whether all of them are known.
  bool ReadPorts(int begin, int end);
  // By slot; empty until its port is known.
  const std::vector<std::string>& addresses() const { return addresses_; }
  std::vector<std::string> primaries() const;
  std::vector<std::string> backups() const;  // Empty without replicas.

  // From a status round over addresses() (by slot): per shard, the status
  // of the replica that serves it (the primary's when none says so).
  std::vector<ServerStatus> Serving(
      const std::vector<ServerStatus>& by_slot) const;

 private:
  const JobConfig& config_;
  const RunFolder* const folder_;
  const Launch launch_;
  std::vector<std::string> addresses_;
};

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_SERVER_FLEET_H_
