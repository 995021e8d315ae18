// A job across hosts (scripts/hosts.sh: network namespaces, each with its
// own address and /dev/shm): the server on one host, each worker on
// another. Its workers find the server cannot map their shared memory and
// send the bytes by the socket, and the job trains exactly as on one host
// (sync: the same figures, digit for digit), on unshaped links and on
// links shaped to a rate. paramd-bench runs its servers on other hosts
// than its workers; paramd-load's exactly-once check passes with its
// servers on other hosts. Slurm runs a job on three slurmd hosts
// (scripts/cross-host-slurm.sh).
#include <catch2/catch.hpp>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/disturbed_runs.h"
#include "tests/hosts.h"
#include "tests/skip_main.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd::testing {

std::string SkipReason() { return TestHosts::SkipReason(); }

namespace {

constexpr absl::Duration kTimeout = absl::Seconds(120);

// The job run with its server and two workers each as `on(k, argv)` says,
// the server listening at `host`; each rank's log.
template <typename On>
std::vector<std::string> RunJob(const std::string& job, const std::string& host,
                                On on) {
  Subprocess server(on(0, {"server/paramd-server", "--job", job, "--shard", "0",
                           "--listen", absl::StrCat(host, ":0")}));
  INFO(server.output());
  REQUIRE(server.ReadUntil("listening on port", kTimeout));
  const std::string address = ListeningAddress(server, host);
  REQUIRE(!address.empty());
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.push_back(std::make_unique<Subprocess>(
        on(rank + 1, {"worker/paramd-worker", "--job", job, "--rank",
                      absl::StrCat(rank), "--servers", address})));
  }
  std::vector<std::string> logs;
  for (auto& worker : workers) {
    const int code = worker->Wait(kTimeout);
    INFO(worker->output());
    CHECK(code == 0);
    logs.push_back(worker->output());
  }
  return logs;
}

TEST_CASE(
    "workers on other hosts than their server send the bytes by the socket "
    "and the job trains as on one host, on unshaped and shaped links",
    "[hosts][integration][process]") {
  const std::string rate = GENERATE("none", "200mbit");
  INFO("links: " << rate);
  JobOptions o;
  o.servers = {"127.0.0.1:0"};  // Each worker is told where (--servers).
  o.workers = 2;
  o.epochs = 2;
  const std::string job = WriteFile(NewTempDir() + "/job.yaml", JobYaml(o));

  const std::vector<std::string> one_host =
      RunJob(job, "127.0.0.1",
             [](int, const std::vector<std::string>& argv) { return argv; });

  TestHosts hosts(3, rate);
  const std::vector<std::string> three_hosts =
      RunJob(job, hosts.address(0),
             [&hosts](int k, const std::vector<std::string>& argv) {
               return hosts.On(k, argv);
             });

  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << "\n" << three_hosts[rank]);
    const std::string expected = RankEpochFigures(one_host[rank]);
    CHECK(!expected.empty());
    CHECK(RankEpochFigures(three_hosts[rank]) == expected);
    // Shared memory on one host; by the socket across hosts.
    CHECK(one_host[rank].find("cannot map this worker's shared") ==
          std::string::npos);
    CHECK(three_hosts[rank].find("cannot map this worker's shared") !=
          std::string::npos);
  }
}

TEST_CASE(
    "paramd-bench's server processes on other hosts: its workers reach "
    "them by their links",
    "[hosts][bench][process]") {
  TestHosts hosts(3);
  Subprocess bench(hosts.On(
      2,
      {"tools/paramd-bench", "--server_processes", "--server_hosts",
       absl::StrCat(hosts.address(0), ",", hosts.address(1)), "--server_launch",
       hosts.Launch(), "--clusters", "2x2", "--sizes", "4K", "--modes",
       "push+pull", "--seconds", "0.2", "--skip_optimizers"}));
  const int code = bench.Wait(kTimeout);
  INFO(bench.output());
  CHECK(code == 0);
  CHECK(bench.output().find(absl::StrCat("to servers at ", hosts.address(0),
                                         ", ", hosts.address(1))) !=
        std::string::npos);
  static const std::regex kRow(R"(\n  push\+pull +4K +([0-9]+) )");
  std::smatch row;
  const std::string output = bench.output();
  REQUIRE(std::regex_search(output, row, kRow));
  CHECK(std::stoll(row[1].str()) > 0);
}

TEST_CASE(
    "paramd-bench's workers as processes on hosts of their own: each runs "
    "on its host, and the cell counts every worker's operations",
    "[hosts][bench][process]") {
  TestHosts hosts(4);
  Subprocess bench(
      hosts.On(0, {"tools/paramd-bench",
                   "--server_processes",
                   "--server_hosts",
                   absl::StrCat(hosts.address(0), ",", hosts.address(1)),
                   "--server_launch",
                   hosts.Launch(),
                   "--worker_hosts",
                   absl::StrCat(hosts.address(2), ",", hosts.address(3)),
                   "--worker_launch",
                   absl::StrReplaceAll(hosts.Launch(), {{"{host}", "{addr}"}}),
                   "--clusters",
                   "2x2",
                   "--sizes",
                   "4K",
                   "--modes",
                   "push+pull",
                   "--policy",
                   "sync",
                   "--seconds",
                   "0.2",
                   "--skip_optimizers"}));
  const int code = bench.Wait(kTimeout);
  INFO(bench.output());
  REQUIRE(code == 0);
  // hosts.sh names host K pd<NAME>h<K>: the workers ran on hosts 2 and 3.
  static const std::regex kHosts(
      R"(\(workers as processes on (pd[a-z0-9]+h2), (pd[a-z0-9]+h3)\))");
  std::smatch where;
  const std::string output = bench.output();
  CHECK(std::regex_search(output, where, kHosts));
  // Under sync the two workers step together: each did the same number of
  // operations, and the row counts both (at least kMinOps each).
  static const std::regex kRow(R"(\n  push\+pull +4K +([0-9]+) )");
  std::smatch row;
  REQUIRE(std::regex_search(output, row, kRow));
  CHECK(std::stoll(row[1].str()) >= 2 * 5);
}

TEST_CASE(
    "no update lost or applied twice across hosts: paramd-load's workers on "
    "one host, its servers on two others, replies dropped and delayed",
    "[hosts][load][process]") {
  TestHosts hosts(3);
  Subprocess load(
      hosts.On(2, {"tools/paramd-load", "--policy", "sync", "--seconds", "2",
                   "--workers", "4", "--server_hosts",
                   absl::StrCat(hosts.address(0), ",", hosts.address(1)),
                   "--server_launch", hosts.Launch()}));
  const int code = load.Wait(kTimeout);
  const std::string out = load.output();
  INFO(out);
  CHECK(code == 0);
  CHECK(absl::StrContains(out, absl::StrCat("servers at ", hosts.address(0))));
  CHECK(absl::StrContains(out, "exact-sum check: passed"));
  CHECK(absl::StrContains(out, "every check passed"));
}

TEST_CASE(
    "paramctl slurm's batch script runs a job across three slurmd hosts: "
    "each worker on its own host, every rank to its end",
    "[hosts][slurm][process]") {
  const std::string missing =
      MissingPrograms({"munged", "slurmctld", "slurmd", "sbatch", "sinfo"});
  if (!missing.empty()) {
    WARN("skipped: " << missing);
    return;
  }
  Subprocess slurm({"/usr/bin/env", "PARAMD_BIN=.",
                    "scripts/cross-host-slurm.sh", "3", "1"});
  const int code = slurm.Wait(kTimeout);
  const std::string out = slurm.output();
  INFO(out);
  REQUIRE(code == 0);
  // The job's three nodes, and each rank's servers elsewhere: rank 2's
  // host holds no server, ranks 0 and 1 each share one with a server.
  const std::regex kNodes(R"(paramd: job \d+ on pd\w+h\[1-3\]: 2 server)");
  CHECK(std::regex_search(out, kNodes));
  CHECK(absl::StrContains(out, "rank 2: shard 0's server at"));
  CHECK(absl::StrContains(out, "rank 2: shard 1's server at"));
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(absl::StrContains(
        out, absl::StrCat("rank ", rank, ": finished 1 epochs")));
  }
}

}  // namespace
}  // namespace paramd::testing
