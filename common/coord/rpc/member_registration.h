// MemberRegistration: this process's key in its job's coordinator
// (coordination.etcd; common/coord/members.h says the keys), held by a
// lease that a thread of its own keeps alive (HeldLease). Destroyed, it
// revokes the lease, so the key goes at once; a process that dies is gone
// from the members within coordination.lease_seconds. A lease lost while
// etcd was out of reach is taken again, and the key written again, once
// etcd answers. ListJobMembers reads who is registered.
#ifndef PARAMD_COMMON_COORD_RPC_MEMBER_REGISTRATION_H_
#define PARAMD_COMMON_COORD_RPC_MEMBER_REGISTRATION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"
#include "common/coord/members.h"
#include "common/coord/rpc/etcd_client.h"
#include "common/coord/rpc/held_lease.h"

namespace paramd {

class MemberRegistration {
 public:
  // Registers `member` of the job `config` (which has a coordinator) and
  // keeps it registered; an error naming coordination.etcd when etcd does
  // not take it.
  static absl::StatusOr<std::unique_ptr<MemberRegistration>> Start(
      const JobConfig& config, const JobMember& member);
  ~MemberRegistration();
  MemberRegistration(const MemberRegistration&) = delete;
  MemberRegistration& operator=(const MemberRegistration&) = delete;

  const std::string& key() const { return key_; }
  // The lease that holds the key now.
  int64_t lease() const;

 private:
  MemberRegistration(std::unique_ptr<EtcdClient> client, std::string key,
                     std::string value);

  const std::unique_ptr<EtcdClient> client_;
  const std::string key_;
  const std::string value_;
  // The lease, the key written under each (set by Start).
  std::unique_ptr<HeldLease> held_;
};

// The members registered for the job `config` (which has a coordinator),
// in key order; a key under the prefix that is not a registration is
// refused, naming it.
absl::StatusOr<std::vector<JobMember>> ListJobMembers(const JobConfig& config);

// For a job whose servers are found in etcd (cluster.servers: {etcd: N}):
// fills config->servers with the addresses its servers registered,
// waiting up to `timeout` for every shard's; UNAVAILABLE naming the shards
// still missing after that (or etcd's error). Does nothing for other jobs.
absl::Status ResolveEtcdServers(JobConfig* config, absl::Duration timeout);

}  // namespace paramd

#endif  // PARAMD_COMMON_COORD_RPC_MEMBER_REGISTRATION_H_
