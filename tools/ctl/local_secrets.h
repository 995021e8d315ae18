// `paramctl run --make-secrets`: writes what a job's security section
// names and that does not exist yet, for a job on this machine: a job
// token (random, mode 0600) and a self-signed certificate and key (openssl,
// valid for localhost, the loopback addresses and the hosts of
// cluster.servers). Files that exist are kept.
#ifndef PARAMD_TOOLS_CTL_LOCAL_SECRETS_H_
#define PARAMD_TOOLS_CTL_LOCAL_SECRETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"

namespace paramd {

// Returns one line per file written or kept, for the user.
absl::StatusOr<std::vector<std::string>> MakeLocalSecrets(
    const JobConfig& config);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_LOCAL_SECRETS_H_
