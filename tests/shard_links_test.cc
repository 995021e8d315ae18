// ShardLinks' choice of replica with replication.factor 2: which calls'
// ends move a shard to its other replica (FailOver), a shard taken for hung
// (Hung, NoteHung) and why it is not moved back at once. No server is
// called: channels connect only when a call is made.
#include "worker/rpc/shard_links.h"

#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

struct Links {
  explicit Links(absl::Duration hung_after, bool backups = true)
      : config(testing::MakeJob(testing::JobOptions{}, testing::NewTempDir())),
        spec(BuildModelSpec(config.model)),
        layout(spec),
        plan(*PartitionPlan::Build(spec, config.chunk_bytes,
                                   config.num_shards())) {
    ShardLinks::Options options;
    if (backups) options.backups = {"127.0.0.1:3", "127.0.0.1:4"};
    options.hung_after = hung_after;
    links = std::make_unique<ShardLinks>(
        ClientSetup{&config, &plan, &layout, 0},
        std::vector<std::string>{"127.0.0.1:1", "127.0.0.1:2"}, JobSecurity{},
        options);
  }

  JobConfig config;
  ModelSpec spec;
  FlatLayout layout;
  PartitionPlan plan;
  std::unique_ptr<ShardLinks> links;
};

TEST_CASE(
    "a shard moves to its other replica only after a call no server "
    "served",
    "[worker][replication]") {
  Links l(absl::Hours(1));
  ShardLinks& links = *l.links;
  CHECK(links.address(0) == "127.0.0.1:1");
  CHECK_FALSE(links.FailOver());  // Nothing noted.

  // A server's refusal of the request says it serves: it stays.
  links.Note(0, absl::InvalidArgumentError("bad push"));
  links.Note(1, absl::CancelledError("cancelled by this worker"));
  CHECK_FALSE(links.FailOver());
  CHECK(links.address(0) == "127.0.0.1:1");
  CHECK(links.address(1) == "127.0.0.1:2");

  // UNAVAILABLE or DEADLINE_EXCEEDED: to the other replica, and back.
  links.Note(1, absl::UnavailableError("connection refused"));
  CHECK(links.FailOver());
  CHECK(links.address(0) == "127.0.0.1:1");
  CHECK(links.address(1) == "127.0.0.1:4");
  links.Note(1, absl::DeadlineExceededError("no reply"));
  CHECK(links.FailOver());
  CHECK(links.address(1) == "127.0.0.1:2");
  // Noted once, moved once.
  CHECK_FALSE(links.FailOver());
}

TEST_CASE(
    "a shard taken for hung is not moved back to the hung replica "
    "while its backup may still refuse",
    "[worker][replication]") {
  Links l(absl::Hours(1));
  ShardLinks& links = *l.links;
  CHECK_FALSE(links.Hung(0));  // Just started: heard from at once.
  links.NoteHung(0, absl::UnavailableError("answered nothing"));
  CHECK(links.FailOver());
  CHECK(links.address(0) == "127.0.0.1:3");
  CHECK_FALSE(links.Hung(0));  // The backup gets a whole hung_after.

  // The backup refuses (its primary was heard from too recently): the
  // shard waits for it instead of going back to the hung primary.
  links.Note(0, absl::UnavailableError("this is the shard's backup"));
  CHECK_FALSE(links.FailOver());
  CHECK(links.address(0) == "127.0.0.1:3");
  // The other shard is not held back.
  links.Note(1, absl::UnavailableError("connection refused"));
  CHECK(links.FailOver());
  CHECK(links.address(1) == "127.0.0.1:4");
}

TEST_CASE("a shard moves back once its hung replica is avoided no more",
          "[worker][replication]") {
  Links l(absl::ZeroDuration());
  ShardLinks& links = *l.links;
  // hung_after 0: any silence at all is too long.
  CHECK(links.Hung(0));
  links.NoteHung(0, absl::UnavailableError("answered nothing"));
  CHECK(links.FailOver());
  CHECK(links.address(0) == "127.0.0.1:3");
  links.Note(0, absl::UnavailableError("still down"));
  CHECK(links.FailOver());  // Avoided for 0 s: back to the primary.
  CHECK(links.address(0) == "127.0.0.1:1");
}

TEST_CASE("a shard without a backup is never taken for hung nor moved",
          "[worker][replication]") {
  Links l(absl::ZeroDuration(), /*backups=*/false);
  ShardLinks& links = *l.links;
  CHECK_FALSE(links.Hung(0));
  links.NoteHung(0, absl::UnavailableError("answered nothing"));
  CHECK_FALSE(links.FailOver());
  CHECK(links.address(0) == "127.0.0.1:1");
}

}  // namespace
}  // namespace paramd
