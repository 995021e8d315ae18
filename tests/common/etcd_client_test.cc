// EtcdClient (common/coord/rpc/etcd_client.h) against a real single-member
// etcd (tests/local_etcd.h): keys, a create that only the first writer
// wins, a replace fenced by the revision read, leases kept alive, revoked
// and expired, watches from now and from a past revision, a member that is
// down passed over, and errors that name the call, the key and the member.
// Skips where etcd is not installed.
#include "common/coord/rpc/etcd_client.h"

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "tests/local_etcd.h"
#include "tests/skip_main.h"

namespace paramd {
namespace testing {

std::string SkipReason() { return MissingPrograms({"etcd"}); }

namespace {

std::unique_ptr<EtcdClient> Client(const std::vector<std::string>& endpoints,
                                   absl::Duration timeout = absl::Seconds(10)) {
  EtcdClient::Options options;
  options.timeout = timeout;
  auto client = EtcdClient::Connect(endpoints, options);
  REQUIRE(client.ok());
  return std::move(*client);
}

// The next `n` events of `watch` (NextEvent, each wait bounded), and no
// more read with them.
std::vector<EtcdEvent> Events(EtcdWatch* watch, size_t n) {
  std::vector<EtcdEvent> pending, out;
  while (out.size() < n) out.push_back(NextEvent(watch, &pending));
  CHECK(pending.empty());
  return out;
}

TEST_CASE("keys are written, read, listed by prefix and deleted",
          "[coord][etcd]") {
  LocalEtcd etcd;
  auto client = Client({etcd.endpoint()});
  auto r1 = client->Put("job/a/1", "one");
  REQUIRE(r1.ok());
  auto r2 = client->Put("job/a/2", "two");
  REQUIRE(r2.ok());
  CHECK(*r2 > *r1);
  REQUIRE(client->Put("job/b", "bee").ok());
  REQUIRE(client->Put("jobx", "not under job/").ok());

  auto one = client->Get("job/a/1");
  REQUIRE(one.ok());
  REQUIRE(one->has_value());
  CHECK((*one)->value == "one");
  CHECK((*one)->create_revision == *r1);
  CHECK((*one)->mod_revision == *r1);
  CHECK((*one)->version == 1);
  auto none = client->Get("job/a/3");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());

  auto a = client->List("job/a/");
  REQUIRE(a.ok());
  REQUIRE(a->kvs.size() == 2);
  CHECK(a->kvs[0].key == "job/a/1");
  CHECK(a->kvs[1].key == "job/a/2");
  CHECK(a->kvs[1].value == "two");
  CHECK(a->revision >= *r2);
  auto job = client->List("job/");
  REQUIRE(job.ok());
  CHECK(job->kvs.size() == 3);  // Not "jobx".
  auto all = client->List("");
  REQUIRE(all.ok());
  CHECK(all->kvs.size() == 4);

  auto rewritten = client->Put("job/a/1", "uno");
  REQUIRE(rewritten.ok());
  one = client->Get("job/a/1");
  REQUIRE(one.ok());
  CHECK((*one)->value == "uno");
  CHECK((*one)->create_revision == *r1);
  CHECK((*one)->mod_revision == *rewritten);
  CHECK((*one)->version == 2);

  auto deleted = client->Delete("job/a/1");
  REQUIRE(deleted.ok());
  CHECK(*deleted);
  deleted = client->Delete("job/a/1");
  REQUIRE(deleted.ok());
  CHECK_FALSE(*deleted);
  none = client->Get("job/a/1");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
}

TEST_CASE("a key is created once, and replaced only at the revision read",
          "[coord][etcd]") {
  LocalEtcd etcd;
  auto client = Client({etcd.endpoint()});
  auto first = client->Create("shard/0/primary", "server-a", 0);
  REQUIRE(first.ok());
  CHECK(first->written);
  CHECK_FALSE(first->holder.has_value());
  // A second claimant finds the first holding it.
  auto second = client->Create("shard/0/primary", "server-b", 0);
  REQUIRE(second.ok());
  CHECK_FALSE(second->written);
  REQUIRE(second->holder.has_value());
  CHECK(second->holder->value == "server-a");
  CHECK(second->holder->mod_revision == first->revision);

  // Two take over from the revision they read: one wins, the other finds
  // the winner.
  const int64_t read = second->holder->mod_revision;
  auto b = client->ReplaceAt("shard/0/primary", read, "server-b", 0);
  REQUIRE(b.ok());
  CHECK(b->written);
  CHECK(b->revision > read);
  auto c = client->ReplaceAt("shard/0/primary", read, "server-c", 0);
  REQUIRE(c.ok());
  CHECK_FALSE(c->written);
  REQUIRE(c->holder.has_value());
  CHECK(c->holder->value == "server-b");
  CHECK(c->holder->mod_revision == b->revision);

  // Revision 0: only where there is no key.
  auto absent_only = client->ReplaceAt("shard/0/primary", 0, "server-d", 0);
  REQUIRE(absent_only.ok());
  CHECK_FALSE(absent_only->written);
  auto fresh = client->ReplaceAt("shard/1/primary", 0, "server-d", 0);
  REQUIRE(fresh.ok());
  CHECK(fresh->written);
  CHECK(client->ReplaceAt("k", -1, "v", 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a lease kept alive lives, and its keys go when it is revoked",
          "[coord][etcd]") {
  LocalEtcd etcd;
  auto client = Client({etcd.endpoint()});
  absl::Duration granted;
  auto lease = client->Grant(absl::Seconds(30), &granted);
  REQUIRE(lease.ok());
  CHECK(granted >= absl::Seconds(30));
  REQUIRE(client->Put("members/server-0", "127.0.0.1:1", *lease).ok());
  auto created = client->Create("shard/0/primary", "server-0", *lease);
  REQUIRE(created.ok());
  CHECK(created->written);
  auto member = client->Get("members/server-0");
  REQUIRE(member.ok());
  REQUIRE(member->has_value());
  CHECK((*member)->lease == *lease);

  auto left = client->KeepAlive(*lease);
  REQUIRE(left.ok());
  CHECK(*left > absl::ZeroDuration());
  CHECK(*left <= granted);

  REQUIRE(client->Revoke(*lease).ok());
  auto gone = client->List("");
  REQUIRE(gone.ok());
  CHECK(gone->kvs.empty());
  auto expired = client->KeepAlive(*lease);
  CHECK(expired.status().code() == absl::StatusCode::kNotFound);
  // A key cannot be attached to a lease that is gone.
  auto refused = client->Put("members/server-0", "x", *lease);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(
      std::string(refused.status().message()),
      Catch::Contains("etcd Put \"members/server-0\" at " + etcd.endpoint()));
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("lease not found"));
  CHECK(client->Grant(absl::ZeroDuration(), nullptr).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a lease not kept alive expires, and a watch sees its keys go",
          "[coord][etcd]") {
  LocalEtcd etcd;
  auto client = Client({etcd.endpoint()});
  auto watch = client->Watch("members/", 0);
  REQUIRE(watch.ok());
  absl::Duration granted;
  auto lease = client->Grant(absl::Seconds(1), &granted);  // etcd: >= 2 s.
  REQUIRE(lease.ok());
  auto put = client->Put("members/server-0", "127.0.0.1:1", *lease);
  REQUIRE(put.ok());
  REQUIRE(client->Put("other/key", "unwatched").ok());
  // No keep-alive: etcd deletes the key once the lease runs out.
  const std::vector<EtcdEvent> events = Events(watch->get(), 2);
  REQUIRE(events.size() == 2);
  CHECK(events[0].type == EtcdEvent::Type::kPut);
  CHECK(events[0].kv.key == "members/server-0");
  CHECK(events[0].kv.value == "127.0.0.1:1");
  CHECK(events[0].kv.mod_revision == *put);
  CHECK(events[1].type == EtcdEvent::Type::kDelete);
  CHECK(events[1].kv.key == "members/server-0");
  CHECK(events[1].kv.mod_revision > *put);
  auto after = client->KeepAlive(*lease);
  CHECK(after.status().code() == absl::StatusCode::kNotFound);
}

TEST_CASE("a watch from a past revision replays every change since",
          "[coord][etcd]") {
  LocalEtcd etcd;
  auto client = Client({etcd.endpoint()});
  auto first = client->Put("plan/version", "1");
  REQUIRE(first.ok());
  REQUIRE(client->Put("plan/version", "2").ok());
  REQUIRE(client->Delete("plan/version").ok());
  auto watch = client->Watch("plan/", *first);
  REQUIRE(watch.ok());
  REQUIRE(client->Put("plan/version", "3").ok());
  const std::vector<EtcdEvent> events = Events(watch->get(), 4);
  REQUIRE(events.size() == 4);
  CHECK(events[0].kv.value == "1");
  CHECK(events[0].kv.mod_revision == *first);
  CHECK(events[1].kv.value == "2");
  CHECK(events[2].type == EtcdEvent::Type::kDelete);
  CHECK(events[3].type == EtcdEvent::Type::kPut);
  CHECK(events[3].kv.value == "3");
  CHECK(events[3].kv.version == 1);  // Created again.
  for (size_t i = 1; i < events.size(); ++i) {
    CHECK(events[i].kv.mod_revision > events[i - 1].kv.mod_revision);
  }
  // Nothing more: a wait with a deadline returns empty.
  auto idle = (*watch)->Next(absl::Now() + absl::Milliseconds(50));
  REQUIRE(idle.ok());
  CHECK(idle->empty());
}

TEST_CASE("a member that is down is passed over; errors name call and member",
          "[coord][etcd]") {
  LocalEtcd etcd;
  auto both = Client({etcd.DeadEndpoint(), etcd.endpoint()});
  REQUIRE(both->Put("k", "v").ok());
  auto read = both->Get("k");
  REQUIRE(read.ok());
  CHECK((*read)->value == "v");
  auto watch = both->Watch("k", 0);
  REQUIRE(watch.ok());

  auto dead = Client({etcd.DeadEndpoint()}, absl::Seconds(2));
  const absl::Status put = dead->Put("k", "v").status();
  CHECK(put.code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(put.message()),
             Catch::Contains("etcd Put \"k\" at " + etcd.DeadEndpoint()));
  CHECK_FALSE(dead->Watch("k", 0).ok());
  CHECK_FALSE(dead->Grant(absl::Seconds(5), nullptr).ok());

  // The watch on the live member ends when it dies, saying so.
  etcd.Kill();
  auto ended = (*watch)->Next(absl::Now() + absl::Seconds(30));
  REQUIRE_FALSE(ended.ok());
  CHECK_THAT(std::string(ended.status().message()),
             Catch::Contains("Watch of prefix \"k\" at " + etcd.endpoint()));

  CHECK(EtcdClient::Connect({}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  const absl::Status empty = EtcdClient::Connect({"a:1", ""}).status();
  CHECK(empty.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(empty.message()),
             Catch::Contains("endpoint [1] is empty"));
}

}  // namespace
}  // namespace testing
}  // namespace paramd
