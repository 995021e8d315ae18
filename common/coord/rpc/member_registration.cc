#include "common/coord/rpc/member_registration.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/clock.h"
#include "common/base/status_macros.h"
#include "common/coord/rpc/coordinator.h"
#include "spdlog/spdlog.h"

namespace paramd {

MemberRegistration::MemberRegistration(std::unique_ptr<EtcdClient> client,
                                       std::string key, std::string value)
    : client_(std::move(client)),
      key_(std::move(key)),
      value_(std::move(value)) {}

absl::StatusOr<std::unique_ptr<MemberRegistration>> MemberRegistration::Start(
    const JobConfig& config, const JobMember& member) {
  const CoordinationConfig& c = config.coordination;
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client, ConnectCoordinator(c));
  std::unique_ptr<MemberRegistration> r(new MemberRegistration(
      std::move(client), MemberKey(config.job_id, member),
      MemberValue(member)));
  HeldLease::Hooks hooks;
  // The key is written under each lease: a lease lost while etcd was out
  // of reach is taken again, and the key with it, once etcd answers.
  hooks.granted = [p = r.get()](int64_t lease) {
    return p->client_->Put(p->key_, p->value_, lease).status();
  };
  hooks.replaced = [p = r.get()] {
    spdlog::warn("coordination: {} registered again (its lease was lost)",
                 p->key_);
  };
  hooks.what = r->key_;
  absl::StatusOr<std::unique_ptr<HeldLease>> held = HeldLease::Start(
      r->client_.get(), absl::Seconds(c.lease_seconds), std::move(hooks));
  if (!held.ok()) {
    return absl::Status(
        held.status().code(),
        absl::StrCat("coordination.etcd [", absl::StrJoin(c.etcd, ", "),
                     "]: could not register ", r->key_, ": ",
                     held.status().message()));
  }
  r->held_ = *std::move(held);
  return r;
}

MemberRegistration::~MemberRegistration() {
  if (held_ == nullptr) return;  // Never registered.
  const int64_t lease = this->lease();
  held_.reset();  // Its thread stops.
  // The key goes now, not a lease later (best effort: etcd may be gone).
  if (absl::Status s = client_->Revoke(lease); !s.ok()) {
    spdlog::warn("coordination: {} stays until its lease runs out: {}", key_,
                 std::string(s.message()));
  }
}

int64_t MemberRegistration::lease() const { return held_->lease(); }

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
