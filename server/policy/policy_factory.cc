#include "server/policy/policy_factory.h"

#include <utility>

#include "server/policy/staleness_rule.h"
#include "server/policy/sync_rule.h"

namespace paramd {

std::unique_ptr<UpdatePolicy> MakeUpdatePolicy(const PolicyConfig& config,
                                               int num_workers,
                                               ShardStore* store) {
  std::unique_ptr<PolicyRule> rule;
  switch (config.type) {
    case PolicyType::kSync:
      rule =
          std::make_unique<SyncRule>(num_workers, store, config.backup_workers);
      break;
    case PolicyType::kAsync:
      rule = std::make_unique<StalenessRule>(store, StalenessRule::kUnbounded,
                                             config.staleness_scaling);
      break;
    case PolicyType::kSsp:
      rule = std::make_unique<StalenessRule>(store, config.staleness,
                                             config.staleness_scaling);
      break;
  }
  if (rule == nullptr) return nullptr;
  return std::make_unique<UpdatePolicy>(num_workers, store, std::move(rule));
}

}  // namespace paramd
