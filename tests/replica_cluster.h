// Every shard of a job with replication.factor 2 served in this process:
// a primary and a backup ParameterServer per shard on loopback ports chosen
// by the OS, each told the other's address, and workers trained against
// them through the gRPC client with both addresses of every shard.
#ifndef PARAMD_TESTS_REPLICA_CLUSTER_H_
#define PARAMD_TESTS_REPLICA_CLUSTER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/config/job_config.h"
#include "server/rpc/parameter_server.h"
#include "worker/trainer.h"

namespace paramd::testing {

// `config` with replication.factor 2 (backups on port 0).
JobConfig WithReplicas(JobConfig config);

class ReplicaCluster {
 public:
  // `config` has replication.factor 2.
  explicit ReplicaCluster(const JobConfig& config);
  ~ReplicaCluster();

  ParameterServer& primary(int shard) { return *primaries_[shard]; }
  ParameterServer& backup(int shard) { return *backups_[shard]; }
  const std::vector<std::string>& primary_addresses() const {
    return primary_addresses_;
  }
  const std::vector<std::string>& backup_addresses() const {
    return backup_addresses_;
  }
  // Stops shard `shard`'s primary as a crash would look to its clients:
  // its calls fail and its port refuses connections.
  void StopPrimary(int shard);

  // Trains every worker of the job in its own thread against both
  // replicas of every shard; `on_step(rank, clock)` runs after each step.
  // Returns the trainers once all finished (fails the test otherwise).
  std::vector<std::unique_ptr<Trainer>> TrainAll(
      const std::function<void(int, uint64_t)>& on_step = nullptr);

 private:
  const JobConfig config_;
  std::vector<std::unique_ptr<ParameterServer>> primaries_, backups_;
  std::vector<std::string> primary_addresses_, backup_addresses_;
};

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_REPLICA_CLUSTER_H_
