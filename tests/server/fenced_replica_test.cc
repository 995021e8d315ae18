// ShardReplica fenced by a coordinator (ShardFence; here an in-memory one
// with etcd's rules, on the pair's fake clock): the starting primary
// holds the shard at its claim's term and marks its backup in sync; a
// backup out of touch is marked behind before the step is acknowledged
// and the primary goes on (no "in doubt" under a fence); a step the fence
// cannot vouch for is not acknowledged and the shard is given up; the
// backup takes over only by the fence's claim — not after silence alone,
// not when marked behind — at the claim's term; a restarted primary finds
// the shard held and is the backup.
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "common/coord/shard_fence.h"
#include "tests/replica_pair.h"

namespace paramd {
namespace {

using testing::Pair;

// What the coordinator holds for the shard.
struct Coordinator {
  std::string holder;  // "" : no one.
  int64_t holder_term = 0;
  int64_t revision = 10;
  std::string mark = "(none)";
  int marks = 0;  // Marks written.
};

class FakeFence final : public ShardFence {
 public:
  FakeFence(Coordinator* c, std::string address)
      : c_(c), address_(std::move(address)) {}

  absl::StatusOr<Claim> ClaimPrimary() override { return ClaimIf(false); }
  absl::StatusOr<Claim> TakeOver() override { return ClaimIf(true); }
  bool Holds() const override { return term_ != 0 && live_ && !lost_; }
  absl::Status Lost() const override {
    return term_ != 0 && lost_ ? absl::FailedPreconditionError("lease lost")
                               : absl::OkStatus();
  }
  absl::Status MarkBackup(bool in_sync) override {
    if (!reachable_) return absl::UnavailableError("etcd out of reach");
    if (term_ == 0 || c_->holder_term != term_) {
      return absl::FailedPreconditionError("not the holder");
    }
    c_->mark = in_sync ? "in-sync" : "behind";
    ++c_->marks;
    return absl::OkStatus();
  }
  std::string Describe() const override { return "fake etcd"; }

  // etcd ends this process's lease: its key goes.
  void Expire() {
    live_ = false;
    lost_ = true;
    if (c_->holder_term == term_) {
      c_->holder.clear();
      c_->holder_term = 0;
    }
  }
  bool reachable_ = true;
  bool live_ = true;

 private:
  absl::StatusOr<Claim> ClaimIf(bool in_sync_only) {
    if (!reachable_) return absl::UnavailableError("etcd out of reach");
    Claim claim;
    if (!c_->holder.empty()) {
      claim.holder = c_->holder;
      claim.term = c_->holder_term;
      claim.why = c_->holder + " holds the shard";
      return claim;
    }
    if (in_sync_only && c_->mark != "in-sync") {
      claim.why = "marked \"" + c_->mark + "\"";
      return claim;
    }
    claim.won = true;
    claim.term = term_ = ++c_->revision;
    c_->holder = address_;
    c_->holder_term = term_;
    c_->mark = "behind";
    return claim;
  }

  Coordinator* const c_;
  const std::string address_;
  int64_t term_ = 0;
  bool lost_ = false;
};

// A pair whose replicas are fenced by `coordinator`.
struct FencedPair : Pair {
  explicit FencedPair(const std::string& policy) : Pair(policy, 1, false) {
    fa = Fence(*a, "a:1");
    fb = Fence(*b, "b:1");
    Start();
  }
  FakeFence* Fence(Shard& shard, const std::string& address) {
    auto fence = std::make_unique<FakeFence>(&coordinator, address);
    FakeFence* raw = fence.get();
    shard.replica()->set_fence(std::move(fence));
    return raw;
  }
  Coordinator coordinator;
  FakeFence* fa = nullptr;
  FakeFence* fb = nullptr;
};

TEST_CASE("a fenced primary holds the shard at its claim's term",
          "[replication][replica][fence]") {
  const std::string policy = GENERATE("sync", "async");
  FencedPair p(policy);
  CHECK(p.coordinator.holder == "a:1");
  CHECK(Pair::Replica(*p.a).role() == "primary");
  CHECK(Pair::Replica(*p.a).term() == 11);
  for (uint64_t c = 0; c < 3; ++c) REQUIRE(p.Push(*p.a, c, 0.5f).ok());
  CHECK(p.coordinator.mark == "in-sync");
  CHECK(Pair::Replica(*p.b).held_version() == 3);
  CHECK(Pair::Replica(*p.b).term() == 11);
  // Marked once: a step writes to the coordinator only when the backup's
  // standing changes.
  CHECK(p.coordinator.marks == 1);
}

TEST_CASE(
    "a fenced primary marks a silent backup behind before acknowledging and "
    "goes on",
    "[replication][replica][fence]") {
  FencedPair p("sync");
  REQUIRE(p.Push(*p.a, 0, 0.5f).ok());
  REQUIRE(p.coordinator.mark == "in-sync");
  p.down.insert("b:1");
  // Past a lease without contact: unfenced, the primary would be in doubt
  // and give the shard up; fenced, the backup cannot take over unmarked.
  p.clock.Advance(absl::Seconds(5));
  REQUIRE(p.Push(*p.a, 1, 0.5f).ok());
  CHECK(p.coordinator.mark == "behind");
  CHECK(Pair::Replica(*p.a).role() == "primary");
  REQUIRE(p.Push(*p.a, 2, 0.5f).ok());
  // The backup answers again: caught up by a tick, and marked in sync.
  p.down.clear();
  p.clock.Advance(absl::Seconds(2));
  p.a->Tick();
  CHECK(Pair::Replica(*p.a).peer_in_sync());
  CHECK(Pair::Replica(*p.b).held_version() == 3);
  REQUIRE(p.Push(*p.a, 3, 0.5f).ok());
  CHECK(p.coordinator.mark == "in-sync");
}

TEST_CASE("a step the fence cannot vouch for is not acknowledged",
          "[replication][replica][fence]") {
  SECTION("the lease is not live") {
    FencedPair p("sync");
    REQUIRE(p.Push(*p.a, 0, 0.5f).ok());
    p.fa->live_ = false;
    const absl::Status s = p.Push(*p.a, 1, 0.5f);
    CHECK(absl::IsUnavailable(s));
    CHECK(absl::StrContains(s.message(), "gave the shard up"));
    CHECK(p.a->replica()->replaced());
  }
  SECTION("the backup is behind and the coordinator out of reach") {
    FencedPair p("async");
    REQUIRE(p.Push(*p.a, 0, 0.5f).ok());
    p.down.insert("b:1");
    p.fa->reachable_ = false;
    const absl::Status s = p.Push(*p.a, 1, 0.5f);
    CHECK(absl::IsUnavailable(s));
    CHECK(absl::StrContains(s.message(), "could not be told"));
    CHECK(p.a->replica()->replaced());
    // The coordinator still says the backup holds every acknowledged step,
    // as it does: step 1 was never acknowledged.
    CHECK(p.coordinator.mark == "in-sync");
  }
  SECTION("the lease is lost while idle") {
    FencedPair p("sync");
    p.fa->Expire();
    p.a->Tick();
    CHECK(p.a->replica()->replaced());
  }
}

TEST_CASE("a fenced backup takes over by the claim only",
          "[replication][replica][fence]") {
  const std::string policy = GENERATE("sync", "async");
  FencedPair p(policy);
  for (uint64_t c = 0; c < 2; ++c) REQUIRE(p.Push(*p.a, c, 0.5f).ok());
  // Silent for two leases but still holding the shard: no takeover.
  p.down.insert("a:1");
  p.clock.Advance(absl::Seconds(9));
  absl::Status s = p.Heartbeat(*p.b);
  CHECK(absl::IsUnavailable(s));
  CHECK(absl::StrContains(s.message(), "a:1 holds the shard"));
  CHECK(Pair::Replica(*p.b).role() == "backup");
  // Asked again at once: the last answer, without asking the coordinator.
  p.fb->reachable_ = false;
  CHECK(absl::StrContains(p.Heartbeat(*p.b).message(), "a:1 holds"));
  p.fb->reachable_ = true;
  // Its lease ends: the backup, marked in sync, takes over at the new
  // claim's term with every acknowledged step.
  p.fa->Expire();
  p.clock.Advance(absl::Seconds(1));
  REQUIRE(p.Heartbeat(*p.b).ok());
  proto::ReplicaStatus b = Pair::Replica(*p.b);
  CHECK(b.role() == "primary");
  CHECK(b.term() == 12);
  CHECK(p.b->store().version() == 2);
  CHECK(p.coordinator.holder == "b:1");
  // The old primary, back, acknowledges nothing: its lease is gone.
  p.down.clear();
  CHECK(absl::IsUnavailable(p.Push(*p.a, 2, 9.0f)));
  CHECK(p.a->replica()->replaced());
  proto::PushResponse response;
  REQUIRE(p.Push(*p.b, 2, 0.25f, &response).ok());
  CHECK(response.version() == 3);

  // Restarted, it finds the shard held and is the backup, caught up.
  p.shards.erase("a:1");
  p.a.reset();
  p.a = p.Make(false);
  p.shards["a:1"] = p.a.get();
  p.a->replica()->SetPeer(p.Connect(), "a:1", "b:1");
  p.fa = p.Fence(*p.a, "a:1");
  REQUIRE(p.a->replica()->Start().ok());
  CHECK(Pair::Replica(*p.a).role() == "backup");
  CHECK(Pair::Replica(*p.a).term() == 12);
  p.clock.Advance(absl::Seconds(2));
  p.b->Tick();
  CHECK(Pair::Replica(*p.a).held_version() == 3);
  REQUIRE(p.Push(*p.b, 3, 0.25f).ok());
  CHECK(p.coordinator.mark == "in-sync");
}

TEST_CASE("a fenced backup marked behind does not take over",
          "[replication][replica][fence]") {
  FencedPair p("sync");
  REQUIRE(p.Push(*p.a, 0, 0.5f).ok());
  p.down.insert("b:1");
  REQUIRE(p.Push(*p.a, 1, 0.5f).ok());  // Acknowledged without the backup.
  REQUIRE(p.coordinator.mark == "behind");
  p.down = {"a:1"};
  p.fa->Expire();
  p.clock.Advance(absl::Seconds(5));
  const absl::Status s = p.Heartbeat(*p.b);
  CHECK(absl::IsUnavailable(s));
  CHECK(absl::StrContains(s.message(), "marked \"behind\""));
  CHECK(Pair::Replica(*p.b).role() == "backup");
  CHECK(p.coordinator.holder.empty());
}

}  // namespace
}  // namespace paramd
