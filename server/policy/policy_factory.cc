#include "server/policy/policy_factory.h"

#include "server/policy/staleness_policy.h"
#include "server/policy/sync_policy.h"

namespace paramd {

std::unique_ptr<UpdatePolicy> MakeUpdatePolicy(const PolicyConfig& config,
                                               int num_workers,
                                               ShardStore* store) {
  switch (config.type) {
    case PolicyType::kSync:
      return std::make_unique<SyncPolicy>(num_workers, store,
                                          config.backup_workers);
    case PolicyType::kAsync:
      return std::make_unique<StalenessPolicy>(num_workers, store,
                                               StalenessPolicy::kUnbounded,
                                               config.staleness_scaling);
    case PolicyType::kSsp:
      return std::make_unique<StalenessPolicy>(
          num_workers, store, config.staleness, config.staleness_scaling);
  }
  return nullptr;
}

}  // namespace paramd
