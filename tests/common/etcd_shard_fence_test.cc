// EtcdShardFence (common/coord/rpc/etcd_shard_fence.h) against a real
// etcd: one holder at a time, each later one at a greater term; a backup
// takes over only when no one holds the shard and the last holder marked
// it in sync; a holder whose lease is lost never holds again (and its
// mark is refused), while a lease lost before any claim is taken anew.
#include "common/coord/rpc/etcd_shard_fence.h"

#include <catch2/catch.hpp>

#include "tests/local_etcd.h"
#include "tests/skip_main.h"

namespace paramd {
namespace testing {

std::string SkipReason() { return MissingPrograms({"etcd"}); }

namespace {

JobConfig Coordinated(const std::string& endpoint) {
  return CoordinatedConfig(endpoint, "fence-job");
}

std::unique_ptr<EtcdShardFence> Open(const JobConfig& config,
                                     const std::string& address) {
  auto fence = EtcdShardFence::Open(config, 3, address);
  REQUIRE(fence.ok());
  return std::move(*fence);
}

std::string Value(EtcdClient& client, const std::string& key) {
  auto kv = client.Get(key);
  REQUIRE(kv.ok());
  return kv->has_value() ? (*kv)->value : "(none)";
}

TEST_CASE("one process holds a shard at a time, each later at a greater term",
          "[coord][fence]") {
  LocalEtcd etcd;
  const JobConfig config = Coordinated(etcd.endpoint());
  auto client = EtcdClient::Connect({etcd.endpoint()});
  REQUIRE(client.ok());
  std::unique_ptr<EtcdShardFence> a = Open(config, "10.0.0.1:5000");
  std::unique_ptr<EtcdShardFence> b = Open(config, "10.0.0.2:5000");
  CHECK_FALSE(a->Holds());
  CHECK(a->Lost().ok());

  auto claim = a->ClaimPrimary();
  REQUIRE(claim.ok());
  REQUIRE(claim->won);
  const int64_t first = claim->term;
  CHECK(a->Holds());
  const std::string primary = EtcdShardFence::PrimaryKey("fence-job", 3);
  const std::string backup = EtcdShardFence::BackupKey("fence-job", 3);
  CHECK(primary == "/paramd/fence-job/shards/3/primary");
  auto kv = (*client)->Get(primary);
  REQUIRE(kv.ok());
  REQUIRE(kv->has_value());
  CHECK((*kv)->create_revision == first);
  CHECK((*kv)->lease == a->lease());
  CHECK((*kv)->value.rfind("10.0.0.1:5000 ", 0) == 0);
  // A new holder's backup holds nothing yet.
  CHECK(Value(**client, backup) == "behind");

  // Held: neither a second primary nor the backup gets it.
  claim = b->ClaimPrimary();
  REQUIRE(claim.ok());
  CHECK_FALSE(claim->won);
  CHECK(claim->holder == "10.0.0.1:5000");
  CHECK(claim->term == first);
  CHECK(claim->why.find("holds the shard at term") != std::string::npos);
  REQUIRE(a->MarkBackup(true).ok());
  CHECK(Value(**client, backup) == "in-sync");
  claim = b->TakeOver();
  REQUIRE(claim.ok());
  CHECK_FALSE(claim->won);
  CHECK_FALSE(b->Holds());
  // Only the holder marks.
  CHECK(b->MarkBackup(false).code() == absl::StatusCode::kFailedPrecondition);

  // The holder stops (its lease revoked with it): its backup, in sync,
  // takes over at a greater term.
  a.reset();
  claim = b->TakeOver();
  REQUIRE(claim.ok());
  REQUIRE(claim->won);
  CHECK(claim->term > first);
  CHECK(b->Holds());
  CHECK(Value(**client, backup) == "behind");
  // A claim is made once per process.
  CHECK(b->ClaimPrimary().status().code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("a backup left behind does not take over; the primary's restart does",
          "[coord][fence]") {
  LocalEtcd etcd;
  const JobConfig config = Coordinated(etcd.endpoint());
  std::unique_ptr<EtcdShardFence> a = Open(config, "10.0.0.1:5000");
  auto claim = a->ClaimPrimary();
  REQUIRE(claim.ok());
  REQUIRE(claim->won);
  REQUIRE(a->MarkBackup(true).ok());
  REQUIRE(a->MarkBackup(false).ok());
  a.reset();

  std::unique_ptr<EtcdShardFence> b = Open(config, "10.0.0.2:5000");
  claim = b->TakeOver();
  REQUIRE(claim.ok());
  CHECK_FALSE(claim->won);
  CHECK(claim->holder.empty());
  CHECK(claim->why.find("\"behind\"") != std::string::npos);
  CHECK_FALSE(b->Holds());

  std::unique_ptr<EtcdShardFence> restarted = Open(config, "10.0.0.1:5000");
  claim = restarted->ClaimPrimary();
  REQUIRE(claim.ok());
  CHECK(claim->won);
}

TEST_CASE("a holder's lost lease is lost for good; an unused one is renewed",
          "[coord][fence]") {
  LocalEtcd etcd;
  const JobConfig config = Coordinated(etcd.endpoint());
  auto client = EtcdClient::Connect({etcd.endpoint()});
  REQUIRE(client.ok());
  std::unique_ptr<EtcdShardFence> a = Open(config, "10.0.0.1:5000");
  std::unique_ptr<EtcdShardFence> b = Open(config, "10.0.0.2:5000");
  auto claim = a->ClaimPrimary();
  REQUIRE(claim.ok());
  REQUIRE(claim->won);
  REQUIRE(a->MarkBackup(true).ok());

  // etcd ends both leases (as it does to leases it stopped hearing about).
  const int64_t b_lease = b->lease();
  REQUIRE((*client)->Revoke(a->lease()).ok());
  REQUIRE((*client)->Revoke(b_lease).ok());
  CHECK_FALSE(a->Renew(/*now=*/true).ok());
  CHECK_FALSE(a->Holds());
  CHECK(a->Lost().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(a->MarkBackup(false).code() == absl::StatusCode::kFailedPrecondition);
  // The backup held nothing under its lease: it takes a new one, and the
  // shard over.
  (void)b->Renew(/*now=*/true);
  CHECK(b->lease() != b_lease);
  claim = b->TakeOver();
  REQUIRE(claim.ok());
  CHECK(claim->won);
  CHECK(b->Holds());
  CHECK_FALSE(a->Holds());
}

TEST_CASE("a fence without etcd names coordination.etcd", "[coord][fence]") {
  LocalEtcd etcd;
  const JobConfig config = Coordinated(etcd.DeadEndpoint());
  auto fence = EtcdShardFence::Open(config, 0, "10.0.0.1:5000");
  REQUIRE_FALSE(fence.ok());
  CHECK(std::string(fence.status().message()).find("coordination.etcd") !=
        std::string::npos);
}

}  // namespace
}  // namespace testing
}  // namespace paramd
