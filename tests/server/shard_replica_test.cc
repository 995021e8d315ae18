// ShardReplica between two Shards in this process on a fake clock, the
// peers calling each other directly: the backup holds every step, refuses
// workers while its primary speaks, takes over after a lease of silence;
// a paused primary that wakes afterwards is refused, applies nothing the
// job sees, and serves nothing more; a restarted primary rejoins as the
// backup; bad Replicate calls are refused naming the field.
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "tests/replica_pair.h"

namespace paramd {
namespace {

using testing::JobOptions;
using testing::Pair;

TEST_CASE("the backup holds every step the primary acknowledged",
          "[replication][replica]") {
  const std::string policy = GENERATE("sync", "async");
  Pair p(policy);
  for (uint64_t c = 0; c < 3; ++c) REQUIRE(p.Push(*p.a, c, 0.5f).ok());
  CHECK(Pair::Replica(*p.a).role() == "primary");
  CHECK(Pair::Replica(*p.a).peer_in_sync());
  CHECK(Pair::Replica(*p.b).role() == "backup");
  CHECK(Pair::Replica(*p.b).held_version() == 3);
  // Nothing of it is served by the backup while the primary speaks.
  proto::PullResponse pulled;
  const absl::Status refused =
      testing::PullInto(*p.b, testing::PullAt(p.config.job_id, 0, 3),
                        absl::InfiniteFuture(), nullptr, &pulled);
  CHECK(absl::IsUnavailable(refused));
  CHECK(absl::StrContains(refused.message(), "this is the shard's backup"));
}

TEST_CASE(
    "after a lease of silence the backup takes over with the primary's "
    "parameters; the woken primary is refused and serves nothing more",
    "[replication][replica]") {
  const std::string policy = GENERATE("sync", "async");
  Pair p(policy);
  for (uint64_t c = 0; c < 2; ++c) REQUIRE(p.Push(*p.a, c, 0.5f).ok());
  // The primary pauses (SIGSTOP): no keep-alive reaches the backup, and a
  // worker's call there after a lease makes it take over.
  p.clock.Advance(absl::Seconds(5));
  REQUIRE(p.Heartbeat(*p.b).ok());
  proto::ReplicaStatus b = Pair::Replica(*p.b);
  CHECK(b.role() == "primary");
  CHECK(b.term() == 2);
  CHECK(b.takeovers() == 1);
  CHECK(p.b->store().version() == 2);
  std::vector<float> at_two;
  p.a->store().Read([&](uint64_t, absl::Span<const std::vector<float>> ps) {
    for (const auto& c : ps) at_two.insert(at_two.end(), c.begin(), c.end());
  });
  std::vector<float> taken;
  p.b->store().Read([&](uint64_t, absl::Span<const std::vector<float>> ps) {
    for (const auto& c : ps) taken.insert(taken.end(), c.begin(), c.end());
  });
  CHECK(taken == at_two);

  // The primary wakes and applies a push: the new primary refuses that
  // step, so the push fails and the old primary is replaced.
  const absl::Status stale = p.Push(*p.a, 2, 9.0f);
  CHECK(absl::IsUnavailable(stale));
  CHECK(absl::StrContains(stale.message(), "replaced by its backup"));
  CHECK(p.a->replica()->replaced());
  CHECK(Pair::Replica(*p.a).role() == "replaced");
  // The job's step 2 goes on at the new primary, without the stale push.
  proto::PushResponse response;
  REQUIRE(p.Push(*p.b, 2, 0.25f, &response).ok());
  CHECK(response.version() == 3);
  CHECK_FALSE(response.duplicate());
  // Every later call to the replaced one is refused.
  proto::PullResponse pulled;
  CHECK(absl::IsUnavailable(
      testing::PullInto(*p.a, testing::PullAt(p.config.job_id, 0, 2),
                        absl::InfiniteFuture(), nullptr, &pulled)));
  CHECK(absl::IsUnavailable(p.Push(*p.a, 3, 0.5f)));
  proto::ReplicateRequest newer;
  newer.set_job_id(p.config.job_id);
  newer.set_term(3);
  proto::ReplicateResponse ignored;
  CHECK(absl::IsUnavailable(p.a->replica()->Replicate(&newer, &ignored)));
  // A restarted primary (a new process at the old address) rejoins as the
  // backup of the new primary, and is caught up.
  p.shards.erase("a:1");
  p.a.reset();
  p.a = p.Make(false);
  p.shards["a:1"] = p.a.get();
  p.a->replica()->SetPeer(p.Connect(), "a:1", "b:1");
  REQUIRE(p.a->replica()->Start().ok());
  CHECK(Pair::Replica(*p.a).role() == "backup");
  CHECK(Pair::Replica(*p.a).term() == 2);
  p.clock.Advance(absl::Seconds(2));
  p.b->Tick();  // The new primary catches its backup up.
  CHECK(Pair::Replica(*p.b).peer_in_sync());
  CHECK(Pair::Replica(*p.a).held_version() == 3);
  REQUIRE(p.Push(*p.b, 3, 0.25f).ok());
  CHECK(Pair::Replica(*p.a).held_version() == 4);
}

TEST_CASE(
    "a primary whose backup is down goes on alone and catches it up when it "
    "answers again",
    "[replication][replica]") {
  Pair p("async");
  p.down.insert("b:1");
  const int before = p.replicate_calls;
  for (uint64_t c = 0; c < 3; ++c) REQUIRE(p.Push(*p.a, c, 0.5f).ok());
  // Refused at once (UNAVAILABLE): asked once, not again at each step.
  CHECK(p.replicate_calls - before == 1);
  proto::ReplicaStatus a = Pair::Replica(*p.a);
  CHECK_FALSE(a.peer_in_sync());
  CHECK(a.lag_versions() == 3);
  CHECK(Pair::Replica(*p.b).held_version() == 0);
  p.down.erase("b:1");
  p.clock.Advance(absl::Seconds(2));
  p.a->Tick();
  a = Pair::Replica(*p.a);
  CHECK(a.peer_in_sync());
  CHECK(a.lag_versions() == 0);
  CHECK(Pair::Replica(*p.b).held_version() == 3);
}

TEST_CASE(
    "a registration is on the backup before it is acknowledged: after a "
    "take-over the rank's first push is applied, not refused",
    "[replication][replica]") {
  Pair p("async", /*workers=*/2);
  REQUIRE(p.Push(*p.a, 0, 0.5f).ok());
  // Rank 1 registers after the last step the backup holds; then the
  // primary pauses past the lease and the backup takes over.
  testing::RegisterAtZero(*p.a, p.config.job_id, 1);
  p.clock.Advance(absl::Seconds(5));
  REQUIRE(p.Heartbeat(*p.b).ok());
  REQUIRE(Pair::Replica(*p.b).role() == "primary");
  proto::PushResponse response;
  const absl::Status pushed = p.Push(*p.b, 0, 0.25f, &response, /*rank=*/1);
  INFO(pushed.ToString());
  REQUIRE(pushed.ok());
  CHECK(response.version() == 2);
  CHECK_FALSE(response.duplicate());
}

TEST_CASE(
    "a backup restarted at its old address is connected to afresh and caught "
    "up by the next step, not after the retry interval",
    "[replication][replica]") {
  const std::string policy = GENERATE("sync", "async");
  Pair p(policy);
  REQUIRE(p.Push(*p.a, 0, 0.5f).ok());
  // The backup dies: the next step finds no answer and leaves it behind.
  p.down.insert("b:1");
  REQUIRE(p.Push(*p.a, 1, 0.5f).ok());
  REQUIRE_FALSE(Pair::Replica(*p.a).peer_in_sync());
  // Started again where it listened (paramctl restarts it on its port), it
  // asks its primary who serves; no time passes.
  p.shards.erase("b:1");
  p.b.reset();
  p.down.erase("b:1");
  p.b = p.Make(true);
  p.shards["b:1"] = p.b.get();
  const int connects = p.connects;
  p.b->replica()->SetPeer(p.Connect(), "b:1", "a:1");
  REQUIRE(p.b->replica()->Start().ok());
  CHECK(Pair::Replica(*p.b).role() == "backup");
  // The primary made a new channel to it (besides the backup's own to the
  // primary): the old one may be in gRPC's reconnect backoff.
  CHECK(p.connects - connects == 2);
  REQUIRE(p.Push(*p.a, 2, 0.5f).ok());
  CHECK(Pair::Replica(*p.a).peer_in_sync());
  CHECK(Pair::Replica(*p.b).held_version() == 3);
}

TEST_CASE(
    "a primary silent for a lease whose step then finds no answer does not "
    "acknowledge it: the backup may have taken over without it",
    "[replication][replica]") {
  const std::string policy = GENERATE("sync", "async");
  Pair p(policy);
  for (uint64_t c = 0; c < 2; ++c) REQUIRE(p.Push(*p.a, c, 0.5f).ok());
  REQUIRE(Pair::Replica(*p.a).peer_in_sync());

  SECTION("no answer on the second try either: it gives the shard up") {
    // Paused past the lease mid-send: the step's Replicate and its retry
    // find no answer (the backup, unheard from, may be serving).
    p.clock.Advance(absl::Seconds(5));
    p.down.insert("b:1");
    const absl::Status step = p.Push(*p.a, 2, 9.0f);
    CHECK(absl::IsUnavailable(step));
    CHECK(p.a->replica()->replaced());
    p.a->Tick();
    proto::PullResponse pulled;
    CHECK(absl::IsUnavailable(
        testing::PullInto(*p.a, testing::PullAt(p.config.job_id, 0, 3),
                          absl::InfiniteFuture(), nullptr, &pulled)));
    // The backup takes over without the step, and the job's step 2 is
    // applied there once: nothing acknowledged was lost.
    p.down.erase("b:1");
    REQUIRE(p.Heartbeat(*p.b).ok());
    CHECK(Pair::Replica(*p.b).role() == "primary");
    proto::PushResponse response;
    REQUIRE(p.Push(*p.b, 2, 0.25f, &response).ok());
    CHECK(response.version() == 3);
    CHECK_FALSE(response.duplicate());
  }
  SECTION("the backup answers the second try: the step is acknowledged") {
    p.clock.Advance(absl::Seconds(5));
    p.drop_next = 1;
    REQUIRE(p.Push(*p.a, 2, 0.5f).ok());
    CHECK_FALSE(p.a->replica()->replaced());
    CHECK(Pair::Replica(*p.a).peer_in_sync());
    CHECK(Pair::Replica(*p.b).held_version() == 3);
  }
  SECTION(
      "within the lease a backup that misses one deadline is sent the step "
      "once more, and holds it before it is acknowledged") {
    p.clock.Advance(absl::Seconds(1));
    p.drop_next = 1;
    const int before = p.replicate_calls;
    REQUIRE(p.Push(*p.a, 2, 0.5f).ok());
    CHECK(p.replicate_calls - before == 2);
    CHECK_FALSE(p.a->replica()->replaced());
    CHECK(Pair::Replica(*p.a).peer_in_sync());
    CHECK(Pair::Replica(*p.b).held_version() == 3);
  }
  SECTION(
      "within the lease a step whose backup misses two deadlines goes on "
      "alone") {
    p.clock.Advance(absl::Seconds(1));
    p.drop_next = 2;
    const int before = p.replicate_calls;
    REQUIRE(p.Push(*p.a, 2, 0.5f).ok());
    CHECK(p.replicate_calls - before == 2);
    CHECK_FALSE(p.a->replica()->replaced());
    CHECK_FALSE(Pair::Replica(*p.a).peer_in_sync());
    CHECK(Pair::Replica(*p.b).held_version() == 2);
    // Left behind, it is not waited for at every step: the next Tick
    // after a second catches it up.
    REQUIRE(p.Push(*p.a, 3, 0.5f).ok());
    CHECK(p.replicate_calls - before == 2);
    p.clock.Advance(absl::Seconds(2));
    p.a->Tick();
    CHECK(Pair::Replica(*p.a).peer_in_sync());
    CHECK(Pair::Replica(*p.b).held_version() == 4);
  }
}

TEST_CASE("Replicate and Handover refuse what is not their shard's",
          "[replication][replica]") {
  Pair p("sync");
  proto::ReplicateRequest r;
  r.set_job_id(p.config.job_id);
  r.set_shard(0);
  r.set_term(1);
  proto::ReplicateResponse out;
  SECTION("another job") {
    r.set_job_id("other");
    const absl::Status s = p.b->replica()->Replicate(&r, &out);
    CHECK(absl::IsInvalidArgument(s));
    CHECK(absl::StrContains(s.message(), "job 'other' shard 0"));
  }
  SECTION("another launch") {
    r.set_launch("elsewhere");
    const absl::Status s = p.b->replica()->Replicate(&r, &out);
    CHECK(absl::IsInvalidArgument(s));
    CHECK(absl::StrContains(s.message(), "launch 'elsewhere'"));
  }
  // A well-formed state of this shard, for the cases to spoil.
  proto::ReplicaState& state = *r.mutable_state();
  state.set_plan_fingerprint(p.a->plan().fingerprint());
  state.set_policy("sync");
  state.set_version(7);
  state.add_clocks(7);
  state.add_last_accepted(6);
  state.add_live(true);
  state.add_registered(true);
  state.set_store_state("not a store");
  SECTION("a state of another plan") {
    state.set_plan_fingerprint(state.plan_fingerprint() + 1);
    const absl::Status s = p.b->replica()->Replicate(&r, &out);
    CHECK(absl::IsInvalidArgument(s));
    CHECK(absl::StrContains(s.message(), "this replica serves plan"));
  }
  SECTION("a state of another policy") {
    state.set_policy("async");
    const absl::Status s = p.b->replica()->Replicate(&r, &out);
    CHECK(absl::IsInvalidArgument(s));
    CHECK(absl::StrContains(s.message(), "policy 'async'"));
  }
  SECTION("a state for another number of workers") {
    state.add_clocks(0);
    const absl::Status s = p.b->replica()->Replicate(&r, &out);
    CHECK(absl::IsInvalidArgument(s));
    CHECK(absl::StrContains(s.message(), "2 clocks, 1 last accepted"));
  }
  SECTION("a state without the store") {
    state.clear_store_state();
    const absl::Status s = p.b->replica()->Replicate(&r, &out);
    CHECK(absl::IsInvalidArgument(s));
    CHECK(absl::StrContains(s.message(), "store_state is empty"));
  }
  SECTION("a store that does not read back is refused when taken over") {
    REQUIRE(p.b->replica()->Replicate(&r, &out).ok());
    CHECK(Pair::Replica(*p.b).held_version() == 7);
    p.clock.Advance(absl::Seconds(5));
    const absl::Status s = p.Heartbeat(*p.b);
    INFO(s.ToString());
    CHECK(
        absl::StrContains(s.message(), "the primary's state does not install"));
    CHECK(p.b->store().version() == 0);
  }
  SECTION("an older term") {
    r.set_term(0);
    const absl::Status s = p.b->replica()->Replicate(&r, &out);
    CHECK(absl::IsFailedPrecondition(s));
    CHECK(absl::StrContains(s.message(), "older than this replica's"));
  }
  SECTION("the primary itself refuses a Replicate") {
    const absl::Status s = p.a->replica()->Replicate(&r, &out);
    CHECK(absl::IsFailedPrecondition(s));
    CHECK(absl::StrContains(s.message(), "serves the shard at term 1"));
  }
  CHECK(Pair::Replica(*p.b).role() == "backup");
}

}  // namespace
}  // namespace paramd
