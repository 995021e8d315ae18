// EtcdShardFence: a shard's fence (common/coord/shard_fence.h) in the
// job's etcd. Keys, under /paramd/JOB/shards/K/:
//   primary  "ADDRESS PID" of the holder, under its lease: created by a
//            claim (its create revision is the term), gone with the lease;
//   backup   "in-sync" or "behind": whether the holder's backup holds
//            every step it acknowledged; no lease (it outlives the holder,
//            so that its backup knows whether it may take over).
// A HeldLease keeps the lease alive (LeaseKeeper). A lease lost
// before any claim is taken anew; once this process held the shard, a
// lost lease is lost for good. Destroyed, it revokes the lease, so a
// stopped holder's key goes at once.
#ifndef PARAMD_COMMON_COORD_RPC_ETCD_SHARD_FENCE_H_
#define PARAMD_COMMON_COORD_RPC_ETCD_SHARD_FENCE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/config/job_config.h"
#include "common/coord/lease_keeper.h"
#include "common/coord/rpc/etcd_client.h"
#include "common/coord/rpc/held_lease.h"
#include "common/coord/shard_fence.h"

namespace paramd {

class EtcdShardFence : public ShardFence {
 public:
  // The fence of shard `shard` of `config` (which has a coordinator) for
  // the process serving at `address`, with its lease granted; an error
  // naming coordination.etcd when etcd does not grant it.
  static absl::StatusOr<std::unique_ptr<EtcdShardFence>> Open(
      const JobConfig& config, int shard, const std::string& address);
  ~EtcdShardFence() override;
  EtcdShardFence(const EtcdShardFence&) = delete;
  EtcdShardFence& operator=(const EtcdShardFence&) = delete;

  // The keys of shard `shard` of job `job_id`.
  static std::string PrimaryKey(const std::string& job_id, int shard);
  static std::string BackupKey(const std::string& job_id, int shard);

  absl::StatusOr<Claim> ClaimPrimary() override;
  absl::StatusOr<Claim> TakeOver() override;
  bool Holds() const override;
  absl::Status Lost() const override;
  absl::Status MarkBackup(bool in_sync) override;
  std::string Describe() const override;

  // Renews the lease when due, or at once when `now` (the keeper's thread
  // does when due); its Tick's answer. A lease lost before any claim is
  // taken anew.
  absl::Status Renew(bool now = false);
  // The lease this process holds now.
  int64_t lease() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  EtcdShardFence(std::unique_ptr<EtcdClient> client, std::string primary_key,
                 std::string backup_key, std::string value);
  // A claim of the shard when `conditions` hold.
  absl::StatusOr<Claim> ClaimIf(std::vector<EtcdCondition> conditions,
                                const char* what) ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<LeaseKeeper> keeper() const;

  const std::unique_ptr<EtcdClient> client_;
  const std::string primary_key_;
  const std::string backup_key_;
  const std::string value_;
  mutable absl::Mutex mu_;
  int64_t term_ ABSL_GUARDED_BY(mu_) = 0;  // The claim won; 0: none.
  // The lease; its keeper is replaced only while no claim was won (a lost
  // lease taken anew). Set by Open; its hooks read term_.
  std::unique_ptr<HeldLease> held_;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_COORD_RPC_ETCD_SHARD_FENCE_H_
