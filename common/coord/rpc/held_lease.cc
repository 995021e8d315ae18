#include "common/coord/rpc/held_lease.h"

#include <algorithm>
#include <utility>

#include "common/base/clock.h"
#include "common/base/status_macros.h"
#include "spdlog/spdlog.h"

namespace paramd {

absl::StatusOr<std::unique_ptr<HeldLease>> HeldLease::Start(EtcdClient* client,
                                                            absl::Duration ttl,
                                                            Hooks hooks) {
  std::unique_ptr<HeldLease> held(new HeldLease(client, ttl, std::move(hooks)));
  RETURN_IF_ERROR(held->Grant());
  held->thread_ = std::thread([p = held.get()] { p->Run(); });
  return held;
}

HeldLease::~HeldLease() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<LeaseKeeper> HeldLease::keeper() const {
  absl::MutexLock lock(&mu_);
  return keeper_;
}

absl::Status HeldLease::Grant() {
  Clock* clock = RealClock();
  const absl::Time sent = clock->Now();
  absl::Duration granted;
  ASSIGN_OR_RETURN(const int64_t lease, client_->Grant(ttl_, &granted));
  if (hooks_.granted) {
    if (absl::Status s = hooks_.granted(lease); !s.ok()) {
      (void)client_->Revoke(lease);
      return s;
    }
  }
  EtcdClient* client = client_;
  auto keeper = std::make_shared<LeaseKeeper>(
      lease, granted, sent,
      [client](int64_t id) { return client->KeepAlive(id); }, clock);
  absl::MutexLock lock(&mu_);
  keeper_ = std::move(keeper);
  return absl::OkStatus();
}

absl::Status HeldLease::Renew(bool now) {
  std::shared_ptr<LeaseKeeper> k = keeper();
  absl::Status s = k->Tick(now);
  if (!k->lost().ok() && (!hooks_.may_replace || hooks_.may_replace())) {
    s = Grant();
    if (s.ok() && hooks_.replaced) hooks_.replaced();
  }
  return s;
}

void HeldLease::Run() {
  Clock* clock = RealClock();
  bool failing = false;
  while (true) {
    std::shared_ptr<LeaseKeeper> k = keeper();
    // A lost lease is taken again every third of a lease until etcd takes
    // it; a live one is renewed when due, and after a failed renewal
    // (NextDue: at once) no sooner than a twentieth of a lease later, so
    // that an etcd out of reach is not asked in a busy loop.
    absl::Time due = k->lost().ok() ? k->NextDue() : clock->Now() + ttl_ / 3;
    if (failing) due = std::max(due, clock->Now() + ttl_ / 20);
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(absl::Condition(&stop_), due);
      if (stop_) return;
    }
    // Lost for good: nothing to renew any more.
    if (!k->lost().ok() && hooks_.may_replace && !hooks_.may_replace()) return;
    const absl::Status s = Renew();
    if (!s.ok() && !failing) {
      spdlog::warn("coordination: keeping the lease of {}: {}", hooks_.what,
                   std::string(s.message()));
    }
    failing = !s.ok();
  }
}

}  // namespace paramd
