// replication.factor 2 end to end with the real binaries under paramctl
// run, and no checkpoints at all: a primary SIGKILLed at a random step
// comes back from its backup's copy; one SIGSTOPped past its lease is
// replaced by its backup (paramctl kills the silent one, which rejoins as
// the backup); a dead backup comes back and is caught up. Under sync each
// disturbed run ends with the undisturbed run's epoch figures to the last
// printed digit; under async and ssp the job completes and learns.
#include <signal.h>

#include <catch2/catch.hpp>
#include <random>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/disturbed_runs.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using testing::Disturbed;
using testing::EpochFigures;
using testing::JobOptions;
using testing::Undisturbed;

// A job of `epochs` epochs (32 steps each) whose shards are replicated and
// which keeps no checkpoint; rank 1 takes 25 ms a step, so that there is
// time to disturb it.
std::string Job(const std::string& policy, int epochs = 3) {
  JobOptions o;
  o.policy = policy;
  o.staleness = 2;
  o.epochs = epochs;
  o.train_limit = 2048;
  o.test_limit = 500;
  o.lease_seconds = 4;
  return testing::WriteFile(
      testing::NewTempDir() + "/job.yaml",
      testing::JobYaml(o) +
          "replication:\n  factor: 2\n"
          "  backups: [\"127.0.0.1:0\", \"127.0.0.1:0\"]\n"
          "checkpoint:\n  enabled: false\n"
          "restart:\n  max: 3\n  backoff_seconds: 0.2\n"
          "testing:\n  slow_rank: 1\n  slow_step_ms: 25\n");
}

TEST_CASE(
    "sync: a primary SIGKILLed at a random step comes back from its "
    "backup's copy, without a checkpoint, and the job ends as undisturbed",
    "[replication][process][sync]") {
  const std::string job = Job("sync");
  const std::vector<std::string> expected = EpochFigures(Undisturbed(job));
  REQUIRE(expected.size() == 3);
  const std::string victim = GENERATE("server 0", "server 1");
  const std::string out = Disturbed(job, victim, SIGKILL, 1);
  INFO(out);
  CHECK(absl::StrContains(out, absl::StrCat(victim, " (pid ")));
  CHECK(absl::StrContains(out, "killed by signal 9"));
  // Back from the backup's state, or the backup took over first.
  CHECK(std::regex_search(
      out, std::regex(R"(took the state of version \d+ from the backup|)"
                      R"(took over from the primary)")));
  CHECK(EpochFigures(out) == expected);
}

TEST_CASE(
    "sync: a primary SIGSTOPped past its lease is replaced by its backup; "
    "killed and restarted, it rejoins as the backup; the job ends as "
    "undisturbed",
    "[replication][process][sync]") {
  // paramctl kills the silent primary ~6-7 s after the stop (its status
  // calls time out after max(lease, 5 s)), restarts it, and the job must
  // still run when it rejoins; at ~0.85 s an epoch after the take-over
  // (~4 s), 3 epochs left too little, so 8 (~9.5 s after the stop).
  const std::string job = Job("sync", 8);
  const std::vector<std::string> expected = EpochFigures(Undisturbed(job));
  const std::string out = Disturbed(job, "server 0", SIGSTOP, 1);
  INFO(out);
  CHECK(absl::StrContains(out, "answered no status call"));
  CHECK(absl::StrContains(out, "took over from the primary"));
  CHECK(absl::StrContains(out, "this process is its backup"));
  CHECK(EpochFigures(out) == expected);
}

TEST_CASE("sync: a SIGKILLed backup comes back and is caught up",
          "[replication][process][sync]") {
  const std::string job = Job("sync");
  const std::vector<std::string> expected = EpochFigures(Undisturbed(job));
  const std::string out = Disturbed(job, "backup 1", SIGKILL, 1);
  INFO(out);
  CHECK(absl::StrContains(out, "restarted backup 1"));
  CHECK(std::regex_search(
      out, std::regex(R"(shard 1: the backup at \S+ holds version [1-9]\d*: )"
                      R"(in sync)")));
  CHECK(EpochFigures(out) == expected);
}

TEST_CASE(
    "async and ssp: a primary SIGKILLed at a random step, the job "
    "completes and learns",
    "[replication][process][async][ssp]") {
  const std::string policy = GENERATE("async", "ssp");
  const std::string out = Disturbed(Job(policy), "server 0", SIGKILL, 1);
  const std::vector<std::string> figures = EpochFigures(out);
  REQUIRE(!figures.empty());
  std::smatch m;
  REQUIRE(std::regex_search(out, m,
                            std::regex(R"(final test accuracy ([0-9.]+))")));
  CHECK(std::stod(m[1]) > 0.4);
}

}  // namespace
}  // namespace paramd
