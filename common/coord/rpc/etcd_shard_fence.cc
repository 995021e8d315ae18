#include "common/coord/rpc/etcd_shard_fence.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/coord/rpc/coordinator.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {

constexpr char kInSync[] = "in-sync";
constexpr char kBehind[] = "behind";

// The holder's address: its key's value up to the pid.
std::string HolderAddress(const std::string& value) {
  return value.substr(0, value.find(' '));
}

}  // namespace

std::string EtcdShardFence::PrimaryKey(const std::string& job_id, int shard) {
  return absl::StrCat("/paramd/", job_id, "/shards/", shard, "/primary");
}

std::string EtcdShardFence::BackupKey(const std::string& job_id, int shard) {
  return absl::StrCat("/paramd/", job_id, "/shards/", shard, "/backup");
}

EtcdShardFence::EtcdShardFence(std::unique_ptr<EtcdClient> client,
                               std::string primary_key, std::string backup_key,
                               std::string value)
    : client_(std::move(client)),
      primary_key_(std::move(primary_key)),
      backup_key_(std::move(backup_key)),
      value_(std::move(value)) {}

absl::StatusOr<std::unique_ptr<EtcdShardFence>> EtcdShardFence::Open(
    const JobConfig& config, int shard, const std::string& address) {
  const absl::Duration ttl = absl::Seconds(config.coordination.lease_seconds);
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client,
                   ConnectCoordinator(config.coordination));
  std::unique_ptr<EtcdShardFence> f(new EtcdShardFence(
      std::move(client), PrimaryKey(config.job_id, shard),
      BackupKey(config.job_id, shard),
      absl::StrCat(address, " ", static_cast<int64_t>(getpid()))));
  HeldLease::Hooks hooks;
  // Nothing was held under a lease lost before a claim: a new one serves
  // as well. Once the shard was claimed, a lost lease is lost for good.
  hooks.may_replace = [p = f.get()] {
    absl::MutexLock lock(&p->mu_);
    return p->term_ == 0;
  };
  hooks.what = f->primary_key_;
  absl::StatusOr<std::unique_ptr<HeldLease>> held =
      HeldLease::Start(f->client_.get(), ttl, std::move(hooks));
  if (!held.ok()) {
    return absl::Status(
        held.status().code(),
        absl::StrCat(f->Describe(), ": no lease for shard ", shard,
                     "'s fence: ", held.status().message()));
  }
  f->held_ = *std::move(held);
  return f;
}

EtcdShardFence::~EtcdShardFence() {
  if (held_ == nullptr) return;
  std::shared_ptr<LeaseKeeper> k = held_->keeper();
  held_.reset();                // Its thread stops.
  if (!k->lost().ok()) return;  // No lease to end.
  // The shard's key goes now, not a lease later (best effort).
  if (absl::Status s = client_->Revoke(k->lease()); !s.ok()) {
    spdlog::warn("coordination: {} stays until its lease runs out: {}",
                 primary_key_, std::string(s.message()));
  }
}

std::string EtcdShardFence::Describe() const {
  return absl::StrCat("coordination.etcd [",
                      absl::StrJoin(client_->endpoints(), ", "), "]");
}

std::shared_ptr<LeaseKeeper> EtcdShardFence::keeper() const {
  return held_->keeper();
}

int64_t EtcdShardFence::lease() const { return held_->lease(); }

absl::Status EtcdShardFence::Renew(bool now) { return held_->Renew(now); }

absl::StatusOr<ShardFence::Claim> EtcdShardFence::ClaimIf(
    std::vector<EtcdCondition> conditions, const char* what) {
  std::shared_ptr<LeaseKeeper> k = keeper();
  if (!k->Live()) {
    return absl::UnavailableError(absl::StrCat(
        what, ": the lease is not live (", Describe(), " out of reach?)"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (term_ != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(what,
                       ": this process claimed the shard before, at "
                       "term ",
                       term_));
    }
  }
  ASSIGN_OR_RETURN(
      const EtcdTxnResult result,
      client_->Txn(conditions, {EtcdWrite{primary_key_, value_, k->lease()},
                                EtcdWrite{backup_key_, kBehind, 0}}));
  Claim claim;
  const std::optional<EtcdKeyValue>& holder =
      result.written ? std::nullopt : result.found[0];
  if (result.written || (holder && holder->lease == k->lease())) {
    // Won (a retried write may find its own first try as the holder).
    claim.won = true;
    claim.term = result.written ? result.revision : holder->create_revision;
    absl::MutexLock lock(&mu_);
    term_ = claim.term;
    return claim;
  }
  if (holder) {
    claim.term = holder->create_revision;
    claim.holder = HolderAddress(holder->value);
    claim.why = absl::StrCat(claim.holder, " holds the shard at term ",
                             claim.term, " (", primary_key_, ")");
  } else {
    const std::optional<EtcdKeyValue>& mark = result.found.back();
    claim.why = absl::StrCat(
        "no one holds the shard, but its last holder marked this backup ",
        mark ? absl::StrCat("\"", mark->value, "\"") : "nothing", " (",
        backup_key_,
        "): it may lack steps that were acknowledged, so it does not take "
        "over; restart the shard's primary");
  }
  return claim;
}

absl::StatusOr<ShardFence::Claim> EtcdShardFence::ClaimPrimary() {
  return ClaimIf({EtcdCondition::Absent(primary_key_)}, "claiming the shard");
}

absl::StatusOr<ShardFence::Claim> EtcdShardFence::TakeOver() {
  return ClaimIf({EtcdCondition::Absent(primary_key_),
                  EtcdCondition::ValueIs(backup_key_, kInSync)},
                 "taking the shard over");
}

bool EtcdShardFence::Holds() const {
  std::shared_ptr<LeaseKeeper> k = keeper();
  absl::MutexLock lock(&mu_);
  return term_ != 0 && k->Live() && k->lost().ok();
}

absl::Status EtcdShardFence::Lost() const {
  std::shared_ptr<LeaseKeeper> k = keeper();
  absl::MutexLock lock(&mu_);
  return term_ != 0 ? k->lost() : absl::OkStatus();
}

absl::Status EtcdShardFence::MarkBackup(bool in_sync) {
  int64_t term = 0;
  {
    absl::MutexLock lock(&mu_);
    term = term_;
  }
  if (term == 0) {
    return absl::FailedPreconditionError(
        "marking the backup: this process holds no claim of the shard");
  }
  ASSIGN_OR_RETURN(
      const EtcdTxnResult result,
      client_->Txn({EtcdCondition::CreatedAt(primary_key_, term)},
                   {EtcdWrite{backup_key_, in_sync ? kInSync : kBehind, 0}}));
  if (!result.written) {
    return absl::FailedPreconditionError(absl::StrCat(
        "marking the backup: ", primary_key_, " is no longer this process's (",
        result.found[0]
            ? absl::StrCat("term ", result.found[0]->create_revision)
            : std::string("gone"),
        "; this process's term ", term, ")"));
  }
  return absl::OkStatus();
}

}  // namespace paramd
