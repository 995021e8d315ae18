#include "common/coord/rpc/etcd_shard_fence.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/clock.h"
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
                               std::string value, absl::Duration ttl)
    : client_(std::move(client)),
      primary_key_(std::move(primary_key)),
      backup_key_(std::move(backup_key)),
      value_(std::move(value)),
      ttl_(ttl) {}

absl::StatusOr<std::unique_ptr<EtcdShardFence>> EtcdShardFence::Open(
    const JobConfig& config, int shard, const std::string& address) {
  const absl::Duration ttl = absl::Seconds(config.coordination.lease_seconds);
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client,
                   ConnectCoordinator(config.coordination));
  std::unique_ptr<EtcdShardFence> f(new EtcdShardFence(
      std::move(client), PrimaryKey(config.job_id, shard),
      BackupKey(config.job_id, shard),
      absl::StrCat(address, " ", static_cast<int64_t>(getpid())), ttl));
  if (absl::Status s = f->Grant(); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat(f->Describe(), ": no lease for shard ", shard,
                               "'s fence: ", s.message()));
  }
  f->thread_ = std::thread([p = f.get()] { p->Run(); });
  return f;
}

EtcdShardFence::~EtcdShardFence() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  std::shared_ptr<LeaseKeeper> k = keeper();
  if (k == nullptr || !k->lost().ok()) return;  // No lease to end.
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
  absl::MutexLock lock(&mu_);
  return keeper_;
}

int64_t EtcdShardFence::lease() const { return keeper()->lease(); }

absl::Status EtcdShardFence::Grant() {
  Clock* clock = RealClock();
  const absl::Time sent = clock->Now();
  absl::Duration granted;
  ASSIGN_OR_RETURN(const int64_t lease, client_->Grant(ttl_, &granted));
  EtcdClient* client = client_.get();
  auto keeper = std::make_shared<LeaseKeeper>(
      lease, granted, sent,
      [client](int64_t id) { return client->KeepAlive(id); }, clock);
  absl::MutexLock lock(&mu_);
  keeper_ = std::move(keeper);
  return absl::OkStatus();
}

absl::Status EtcdShardFence::Renew(bool now) {
  std::shared_ptr<LeaseKeeper> k = keeper();
  absl::Status s = k->Tick(now);
  bool claimed = false;
  {
    absl::MutexLock lock(&mu_);
    claimed = term_ != 0;
  }
  if (!k->lost().ok() && !claimed) {
    // Nothing was held under it: a new lease serves as well.
    s = Grant();
  }
  return s;
}

void EtcdShardFence::Run() {
  Clock* clock = RealClock();
  bool failing = false;
  while (true) {
    std::shared_ptr<LeaseKeeper> k = keeper();
    absl::Time due = k->lost().ok() ? k->NextDue() : clock->Now() + ttl_ / 3;
    // After a failed renewal, no sooner than a twentieth of a lease later:
    // an etcd out of reach is not asked in a busy loop.
    if (failing) due = std::max(due, clock->Now() + ttl_ / 20);
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(absl::Condition(&stop_), due);
      if (stop_) return;
      // Lost after a claim: nothing to renew any more.
      if (term_ != 0 && !keeper_->lost().ok()) return;
    }
    const absl::Status s = Renew();
    if (!s.ok() && !failing) {
      spdlog::warn("coordination: keeping the lease of {}: {}", primary_key_,
                   std::string(s.message()));
    }
    failing = !s.ok();
  }
}

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
