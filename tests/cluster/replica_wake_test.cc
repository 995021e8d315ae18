// A primary that stops answering without dying, with the real binaries and
// no supervisor: paramd-server processes started by hand (primary and
// backup of one shard) and two paramd-worker processes, sync. The primary
// is SIGSTOPped at a random step; once its backup has taken over, it is
// woken with SIGCONT. The woken primary must learn it was replaced and
// stop (status 3) without serving or applying anything more; started
// again it rejoins as the backup and is caught up; and the workers end
// with the undisturbed run's figures, so no update was lost or applied
// twice.
#include <signal.h>

#include <catch2/catch.hpp>
#include <memory>
#include <random>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Minutes(2);

// One shard, replicated, sync, 3 epochs of 32 steps; rank 1 takes 25 ms a
// step so that there is time to stop the primary mid-epoch.
std::string Job() {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.epochs = 3;
  o.train_limit = 2048;
  o.test_limit = 500;
  o.lease_seconds = 4;
  return WriteFile(NewTempDir() + "/job.yaml",
                   JobYaml(o) +
                       "replication:\n  factor: 2\n"
                       "  backups: [\"127.0.0.1:0\"]\n"
                       "testing:\n  slow_rank: 1\n  slow_step_ms: 25\n");
}

// Every "rank R: epoch E/3: train loss L, test accuracy A" a worker printed.
std::vector<std::string> EpochLines(const std::string& output) {
  std::vector<std::string> out;
  const std::regex line(
      R"(rank \d: epoch \d/3: train loss [0-9.]+, test accuracy [0-9.]+)");
  for (std::sregex_iterator it(output.begin(), output.end(), line), end;
       it != end; ++it) {
    out.push_back(it->str());
  }
  return out;
}

struct Replicas {
  std::unique_ptr<Subprocess> backup, primary;
  std::string backup_address, primary_address;
  std::unique_ptr<Subprocess> workers[2];
};

// Backup first (its primary is told its address), then the primary, then
// both workers with both addresses.
void Start(const std::string& job, Replicas* r) {
  r->backup = StartServer(job, &r->backup_address, {"--backup"}, kTimeout);
  r->primary = StartServer(job, &r->primary_address,
                           {"--peer", r->backup_address}, kTimeout);
  for (int rank = 0; rank < 2; ++rank) {
    r->workers[rank] = StartWorker(job, rank, r->primary_address,
                                   {"--backups", r->backup_address});
  }
}

// Both workers' epoch lines, after each ended cleanly.
std::vector<std::string> Finish(Replicas* r) {
  std::vector<std::string> lines;
  for (auto& w : r->workers) {
    const int code = w->Wait(kTimeout);
    INFO(w->output());
    REQUIRE(code == 0);
    for (std::string& l : EpochLines(w->output())) lines.push_back(l);
  }
  return lines;
}

TEST_CASE(
    "sync: a primary SIGSTOPped past its lease and woken is replaced, "
    "applies nothing more, stops with status 3 and rejoins as the backup",
    "[replication][process][sync][sigstop]") {
  const std::string job = Job();
  Replicas undisturbed;
  Start(job, &undisturbed);
  const std::vector<std::string> expected = Finish(&undisturbed);
  REQUIRE(expected.size() == 6);

  Replicas r;
  Start(job, &r);
  REQUIRE(r.workers[1]->ReadUntil("rank 1: epoch 1/3", kTimeout));
  std::mt19937 random(std::random_device{}());
  const absl::Time until =
      absl::Now() + absl::Milliseconds(static_cast<int>(random() % 500));
  while (absl::Now() < until) {
  }
  r.primary->Signal(SIGSTOP);
  // The workers' calls to the stopped primary end; the backup refuses them
  // until the primary has been silent for the lease, then takes over.
  if (!r.backup->ReadUntil("took over from the primary", kTimeout)) {
    FAIL("no take-over; backup:\n"
         << r.backup->output() << "\nrank 0:\n"
         << r.workers[0]->output());
  }
  r.primary->Signal(SIGCONT);

  // Woken, the old primary reaches the newer term (its keep-alive, or the
  // new primary's Replicate) and stops: nothing it still held in its
  // sockets is applied anywhere. Woken in the middle of sending a step to
  // its backup, it stops without acknowledging that step, when the new
  // primary refuses it or when, unheard for a lease, it gets no answer.
  const int code = r.primary->Wait(kTimeout);
  INFO(r.primary->output());
  CHECK(code == 3);
  CHECK(std::regex_search(
      r.primary->output(),
      std::regex(R"(shard 0: (replaced: .* serves the shard|out of touch )"
                 R"(with its backup at .* it may serve the shard now))")));
  CHECK(absl::StrContains(r.primary->output(), "replaced by its backup"));

  // Started again on a new port, it asks its peer first and becomes the
  // backup; the serving replica catches it up.
  std::string again_address;
  std::unique_ptr<Subprocess> again =
      StartServer(job, &again_address, {"--peer", r.backup_address}, kTimeout);
  REQUIRE(again->ReadUntil("this process is its backup", kTimeout));
  REQUIRE(r.backup->ReadUntil(
      absl::StrCat("the backup at ", again_address, " holds version"),
      kTimeout));

  // The workers end as undisturbed: every acknowledged update is on the
  // serving replica, and none was applied twice.
  CHECK(Finish(&r) == expected);
  CHECK(absl::StrContains(r.backup->output(), "in sync"));
}

}  // namespace
}  // namespace paramd::testing
