#include "common/coord/rpc/member_registration.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/clock.h"
#include "common/base/status_macros.h"
#include "common/coord/rpc/coordinator.h"
#include "spdlog/spdlog.h"

namespace paramd {

MemberRegistration::MemberRegistration(std::unique_ptr<EtcdClient> client,
                                       std::string key, std::string value,
                                       absl::Duration ttl)
    : client_(std::move(client)),
      key_(std::move(key)),
      value_(std::move(value)),
      ttl_(ttl) {}

absl::StatusOr<std::unique_ptr<MemberRegistration>> MemberRegistration::Start(
    const JobConfig& config, const JobMember& member) {
  const CoordinationConfig& c = config.coordination;
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client, ConnectCoordinator(c));
  std::unique_ptr<MemberRegistration> r(new MemberRegistration(
      std::move(client), MemberKey(config.job_id, member), MemberValue(member),
      absl::Seconds(c.lease_seconds)));
  if (absl::Status s = r->Register(); !s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat("coordination.etcd [", absl::StrJoin(c.etcd, ", "),
                     "]: could not register ", r->key_, ": ", s.message()));
  }
  r->thread_ = std::thread([p = r.get()] { p->Run(); });
  return r;
}

MemberRegistration::~MemberRegistration() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  // The key goes now, not a lease later (best effort: etcd may be gone).
  const int64_t lease = this->lease();
  if (lease != 0) {
    if (absl::Status s = client_->Revoke(lease); !s.ok()) {
      spdlog::warn("coordination: {} stays until its lease runs out: {}", key_,
                   std::string(s.message()));
    }
  }
}

int64_t MemberRegistration::lease() const {
  absl::MutexLock lock(&mu_);
  return lease_;
}

absl::Status MemberRegistration::Register() {
  Clock* clock = RealClock();
  const absl::Time sent = clock->Now();
  absl::Duration granted;
  ASSIGN_OR_RETURN(const int64_t lease, client_->Grant(ttl_, &granted));
  if (absl::StatusOr<int64_t> put = client_->Put(key_, value_, lease);
      !put.ok()) {
    (void)client_->Revoke(lease);
    return put.status();
  }
  EtcdClient* client = client_.get();
  keeper_ = std::make_unique<LeaseKeeper>(
      lease, granted, sent,
      [client](int64_t id) { return client->KeepAlive(id); }, clock);
  absl::MutexLock lock(&mu_);
  lease_ = lease;
  return absl::OkStatus();
}

void MemberRegistration::Run() {
  Clock* clock = RealClock();
  bool failing = false;
  while (true) {
    // A lost lease is taken again every third of a lease until etcd takes
    // it; a live one is renewed when due, and after a failed renewal
    // (NextDue: at once) no sooner than a twentieth of a lease later, so
    // that an etcd out of reach is not asked in a busy loop.
    absl::Time due =
        keeper_->lost().ok() ? keeper_->NextDue() : clock->Now() + ttl_ / 3;
    if (failing) due = std::max(due, clock->Now() + ttl_ / 20);
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(absl::Condition(&stop_), due);
      if (stop_) return;
    }
    absl::Status s = keeper_->Tick();
    if (!keeper_->lost().ok()) {
      s = Register();
      if (s.ok()) {
        spdlog::warn("coordination: {} registered again (its lease was lost)",
                     key_);
      }
    }
    if (!s.ok() && !failing) {
      spdlog::warn("coordination: keeping {} registered: {}", key_,
                   std::string(s.message()));
    }
    failing = !s.ok();
  }
}

absl::StatusOr<std::vector<JobMember>> ListJobMembers(const JobConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client,
                   ConnectCoordinator(config.coordination));
  ASSIGN_OR_RETURN(const EtcdRange range,
                   client->List(MembersPrefix(config.job_id)));
  std::vector<JobMember> members;
  for (const EtcdKeyValue& kv : range.kvs) {
    ASSIGN_OR_RETURN(JobMember m, ParseMember(config.job_id, kv.key, kv.value));
    members.push_back(std::move(m));
  }
  return members;
}

absl::Status ResolveEtcdServers(JobConfig* config, absl::Duration timeout) {
  if (!config->servers_from_etcd) return absl::OkStatus();
  Clock* clock = RealClock();
  const absl::Time deadline = clock->Now() + timeout;
  bool said = false;
  while (true) {
    ASSIGN_OR_RETURN(const std::vector<JobMember> members,
                     ListJobMembers(*config));
    std::vector<std::string> found(config->num_shards());
    for (const JobMember& m : members) {
      if (m.kind == "server" && m.id >= 0 && m.id < config->num_shards()) {
        found[m.id] = m.address;
      }
    }
    std::vector<int> missing;
    for (int k = 0; k < config->num_shards(); ++k) {
      if (found[k].empty()) missing.push_back(k);
    }
    if (missing.empty()) {
      config->servers = std::move(found);
      return absl::OkStatus();
    }
    const std::string which = absl::StrJoin(missing, ", ");
    if (clock->Now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "cluster.servers {etcd: ", config->num_shards(), "}: server(s) ",
          which, " did not register in coordination.etcd [",
          absl::StrJoin(config->coordination.etcd, ", "), "] within ",
          absl::FormatDuration(timeout)));
    }
    if (!said) {
      spdlog::info("waiting for server(s) {} to register in etcd ({})", which,
                   MembersPrefix(config->job_id));
      said = true;
    }
    clock->SleepUntil(clock->Now() + absl::Milliseconds(200));
  }
}

}  // namespace paramd
