// MakeUpdatePolicy: an UpdatePolicy with the rule a job's policy section
// names (sync, async or ssp), apart from UpdatePolicy so that the policy
// does not know the rules.
#ifndef PARAMD_SERVER_POLICY_POLICY_FACTORY_H_
#define PARAMD_SERVER_POLICY_POLICY_FACTORY_H_

#include <memory>

#include "common/config/job_config.h"
#include "server/policy/update_policy.h"
#include "server/store/shard_store.h"

namespace paramd {

// The policy `config` names, over `store`, which must outlive it.
std::unique_ptr<UpdatePolicy> MakeUpdatePolicy(const PolicyConfig& config,
                                               int num_workers,
                                               ShardStore* store);

}  // namespace paramd

#endif  // PARAMD_SERVER_POLICY_POLICY_FACTORY_H_
