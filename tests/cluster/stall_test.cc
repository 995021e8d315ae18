// The stall inspector end to end with the real binaries: a worker stopped
// with SIGSTOP (alive, holding its lease, silent) stalls the sync round;
// the server's log, `paramctl status` and its /metrics each name the rank.
#include <signal.h>

#include <catch2/catch.hpp>
#include <regex>

#include "absl/strings/str_cat.h"
#include "tests/http_stub.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(90);

// The value of the sample written exactly as `series` (name and labels).
double Sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  INFO(series);
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + series.size() + 2));
}

TEST_CASE("a stopped worker is named as the stall by log, status and metrics",
          "[stall][diagnostics]") {
  const std::string dir = NewTempDir();
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = 2;
  o.epochs = 400;         // outlives the test; killed at its end
  o.lease_seconds = 600;  // the stopped worker keeps its lease throughout
  o.stall_warn_seconds = 1;
  const std::string job = WriteFile(dir + "/job.yaml", JobYaml(o));
  Subprocess server({"server/paramd-server", "--job", job, "--shard", "0",
                     "--listen", "127.0.0.1:0", "--metrics_listen",
                     "127.0.0.1:0", "--metrics_port_file",
                     dir + "/server.metrics"});
  REQUIRE(server.ReadUntil("metrics at", kTimeout));
  const std::string address = ListeningAddress(server);
  REQUIRE(!address.empty());
  const int metrics_port = std::stoi(ReadFileOrEmpty(dir + "/server.metrics"));
  std::unique_ptr<Subprocess> w0 = StartWorker(job, 0, address);
  std::unique_ptr<Subprocess> w1 = StartWorker(job, 1, address);
  REQUIRE(w1->ReadUntil("epoch 1/", kTimeout));
  w1->Signal(SIGSTOP);

  // The log: rank 0's pull of the next round waits for rank 1.
  REQUIRE(server.ReadUntil("waits for rank(s) 1 to push clock", kTimeout));
  REQUIRE(server.ReadUntil("of waiting)", kTimeout));
  const std::string log = server.output();
  INFO(log.substr(log.size() > 2000 ? log.size() - 2000 : 0));
  std::smatch line;
  REQUIRE(std::regex_search(
      log, line,
      std::regex(R"(shard 0: stall: a pull of rank 0 at clock (\d+) has )"
                 R"(waited ([0-9.]+)s for version \d+: round (\d+) waits )"
                 R"(for rank\(s\) 1 to push clock \d+; rank 1: live, last )"
                 R"(pushed clock (\d+) [0-9.]+s ago, last heartbeat )"
                 R"((?:[0-9.]+s ago|never) \(warning 1, next after 2s of )"
                 R"(waiting\))")));
  CHECK(std::stod(line[2]) >= 1.0);  // past stall_warn_seconds (rounded)
  // Rank 1 stopped with its push of the round before missing.
  CHECK(std::stoull(line[4]) + 1 == std::stoull(line[3]));

  // paramctl status marks the pull and says what rank 1 last did.
  std::string status;
  REQUIRE(RunCommand(
              {"tools/paramctl", "status", "--job", job, "--servers", address},
              &status, kTimeout) == 0);
  INFO(status);
  CHECK(std::regex_search(
      status, std::regex(R"(  shard 0: STALLED rank 0 at clock )")));
  CHECK(std::regex_search(
      status, std::regex(R"(\n    rank 1: live, clock \d+, last push )"
                         R"([0-9.]+s ago, last heartbeat )"
                         R"((?:[0-9.]+s ago|never)\n)")));

  // The metrics.
  absl::StatusOr<HttpResponse> scrape =
      HttpGet("127.0.0.1", metrics_port, "/metrics");
  REQUIRE(scrape.ok());
  const std::string labels = R"({paramd_job="test-job",shard="0")";
  CHECK(Sample(scrape->body,
               "paramd_worker_stalling" + labels + R"(,rank="1"})") == 1);
  CHECK(Sample(scrape->body,
               "paramd_worker_stalling" + labels + R"(,rank="0"})") == 0);
  CHECK(Sample(scrape->body, "paramd_stalled_pulls" + labels + "}") >= 1);
  CHECK(Sample(scrape->body, "paramd_stall_warnings_total" + labels + "}") >=
        1);
  w1->Signal(SIGCONT);
}

}  // namespace
}  // namespace paramd::testing
