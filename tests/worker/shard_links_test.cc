// ShardLinks with replication.factor 2 calls each shard where its
// ReplicaChoice says (the choice itself: replica_choice_test), on the
// job's clock: FailOver moves a shard's calls to its other replica's
// address, and a shard without a backup stays. No server is called:
// channels connect only when a call is made.
#include "worker/rpc/shard_links.h"

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "common/base/clock.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

struct Links {
  explicit Links(bool backups = true)
      : config(testing::MakeJob(testing::JobOptions{}, testing::NewTempDir())),
        spec(BuildModelSpec(config.model)),
        layout(spec),
        plan(*PartitionPlan::Build(spec, config.chunk_bytes,
                                   config.num_shards())) {
    ShardLinks::Options options;
    if (backups) options.backups = {"127.0.0.1:3", "127.0.0.1:4"};
    options.hung_after = absl::Seconds(5);
    options.clock = &clock;
    links = std::make_unique<ShardLinks>(
        ClientSetup{&config, &plan, &layout, 0},
        std::vector<std::string>{"127.0.0.1:1", "127.0.0.1:2"}, JobSecurity{},
        options);
  }

  FakeClock clock;
  JobConfig config;
  ModelSpec spec;
  FlatLayout layout;
  PartitionPlan plan;
  std::unique_ptr<ShardLinks> links;
};

TEST_CASE(
    "shard links: calls go where the replica choice says, and a shard "
    "taken for hung on the job's clock moves",
    "[worker][replication]") {
  Links l;
  ShardLinks& links = *l.links;
  CHECK(links.address(0) == "127.0.0.1:1");
  CHECK(links.address(1) == "127.0.0.1:2");
  CHECK_FALSE(links.FailOver());  // Nothing noted.
  links.replicas().Note(1, absl::UnavailableError("connection refused"));
  CHECK(links.FailOver());
  CHECK(links.address(0) == "127.0.0.1:1");
  CHECK(links.address(1) == "127.0.0.1:4");
  // Silent past hung_after on the options' clock (a FakeClock here).
  CHECK_FALSE(links.replicas().Hung(0));
  l.clock.Advance(absl::Seconds(6));
  REQUIRE(links.replicas().Hung(0));
  links.replicas().NoteHung(0, absl::UnavailableError("answered nothing"));
  CHECK(links.FailOver());
  CHECK(links.address(0) == "127.0.0.1:3");
}

TEST_CASE("shard links: a shard without a backup stays where it is",
          "[worker][replication]") {
  Links l(/*backups=*/false);
  ShardLinks& links = *l.links;
  links.replicas().Note(0, absl::UnavailableError("connection refused"));
  CHECK_FALSE(links.FailOver());
  CHECK(links.address(0) == "127.0.0.1:1");
}

}  // namespace
}  // namespace paramd
