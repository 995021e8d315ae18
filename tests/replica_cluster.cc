#include "tests/replica_cluster.h"

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "tests/cluster_training.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd::testing {

JobConfig WithReplicas(JobConfig config) {
  config.replication.factor = 2;
  config.replication.backups.assign(config.num_shards(), "127.0.0.1:0");
  return config;
}

ReplicaCluster::ReplicaCluster(const JobConfig& config) : config_(config) {
  REQUIRE(config.replication.enabled());
  for (int k = 0; k < config.num_shards(); ++k) {
    for (bool backup : {false, true}) {
      ShardOptions options;
      options.backup = backup;
      auto server = ParameterServer::Create(config, k, nullptr, options);
      INFO(server.status().ToString());
      REQUIRE(server.ok());
      absl::StatusOr<int> port = (*server)->Start("127.0.0.1:0");
      INFO(port.status().ToString());
      REQUIRE(port.ok());
      (backup ? backup_addresses_ : primary_addresses_)
          .push_back(absl::StrCat("127.0.0.1:", *port));
      (backup ? backups_ : primaries_).push_back(*std::move(server));
    }
  }
  // The backups first: each asks its primary, which answers "primary".
  for (int k = 0; k < config.num_shards(); ++k) {
    absl::Status s =
        backups_[k]->StartReplica(backup_addresses_[k], primary_addresses_[k]);
    INFO(s.ToString());
    REQUIRE(s.ok());
    s = primaries_[k]->StartReplica(primary_addresses_[k],
                                    backup_addresses_[k]);
    INFO(s.ToString());
    REQUIRE(s.ok());
  }
}

ReplicaCluster::~ReplicaCluster() {
  for (auto* group : {&primaries_, &backups_}) {
    for (auto& s : *group) s->Shutdown();
  }
  for (auto* group : {&primaries_, &backups_}) {
    for (auto& s : *group) s->Wait();
  }
}

void ReplicaCluster::StopPrimary(int shard) { primaries_[shard]->Shutdown(); }

std::vector<std::unique_ptr<Trainer>> ReplicaCluster::TrainAll(
    const std::function<void(int, uint64_t)>& on_step) {
  std::vector<std::unique_ptr<Trainer>> trainers;
  for (int rank = 0; rank < config_.num_workers; ++rank) {
    TrainerOptions t;
    if (on_step) {
      t.on_step = [on_step, rank](uint64_t clock, double) {
        on_step(rank, clock);
      };
    }
    GrpcClientOptions client;
    client.backups = backup_addresses_;
    auto trainer =
        Trainer::Create(config_, rank, std::move(t),
                        GrpcParameterClientFactory(primary_addresses_, client));
    INFO(trainer.status().ToString());
    REQUIRE(trainer.ok());
    trainers.push_back(*std::move(trainer));
  }
  RunAll(trainers);
  return trainers;
}

}  // namespace paramd::testing
