// paramctl trace --job on a job that is already running, with the real
// binaries: the window it picks ahead of the workers reaches both workers
// through their heartbeats, every process records exactly those steps, and
// the merged file holds each worker's steps and the server's events of
// them; a folder holding an earlier trace is refused.
#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"
#include "tests/trace_reader.h"

namespace paramd::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(90);

TEST_CASE("paramctl trace records a window of a running job",
          "[trace][diagnostics]") {
  const std::string dir = NewTempDir();
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = 2;
  o.epochs = 400;  // outlives the test; killed at its end
  const std::string job = WriteFile(dir + "/job.yaml", JobYaml(o));
  std::string address;
  std::unique_ptr<Subprocess> server = StartServer(job, &address, {}, kTimeout);
  std::unique_ptr<Subprocess> w0 = StartWorker(job, 0, address);
  std::unique_ptr<Subprocess> w1 = StartWorker(job, 1, address);
  REQUIRE(w0->ReadUntil("epoch 1/", kTimeout));
  REQUIRE(w1->ReadUntil("epoch 1/", kTimeout));

  const std::string out = dir + "/live";
  std::string said;
  REQUIRE(RunCommand({"tools/paramctl", "trace", "--job", job, "--servers",
                      address, "--steps", "3", "--dir", out},
                     &said, kTimeout) == 0);
  INFO(said);
  std::smatch window;
  REQUIRE(std::regex_search(
      said, window, std::regex(R"(tracing steps \[(\d+), (\d+)\) of 2 live)")));
  const int64_t from = std::stoll(window[1]);
  CHECK(std::stoll(window[2]) == from + 3);
  CHECK(said.find("step timeline written to " + out + "/trace.json") !=
        std::string::npos);

  absl::StatusOr<TraceDocument> doc =
      ReadTrace(ReadFileOrEmpty(out + "/trace.json"));
  INFO(doc.status().message());
  REQUIRE(doc.ok());
  CHECK(doc->processes.count(0) == 1);
  CHECK(doc->processes.count(1000) == 1);
  CHECK(doc->processes.count(1001) == 1);
  std::set<std::tuple<int, std::string, int64_t>> seen;
  for (const TraceEvent& e : doc->events) {
    INFO(e.name << " pid " << e.pid << " clock " << e.clock);
    CHECK(e.clock >= from);
    CHECK(e.clock < from + 3);
    seen.insert({e.pid, e.name, e.clock});
  }
  for (int64_t c = from; c < from + 3; ++c) {
    INFO("clock " << c);
    CHECK(seen.count({1000, "step", c}) == 1);
    CHECK(seen.count({1001, "step", c}) == 1);
    CHECK(seen.count({0, "apply", c}) == 1);  // both ranks: one lane each
  }
  // The server saw both ranks' steps.
  int applies = 0;
  for (const TraceEvent& e : doc->events) applies += e.name == "apply";
  CHECK(applies == 2 * 3);

  // The folder holds that trace now: a second one there is refused.
  std::string again;
  CHECK(RunCommand({"tools/paramctl", "trace", "--job", job, "--servers",
                    address, "--dir", out},
                   &again, kTimeout) == 1);
  CHECK(again.find("holds trace files already") != std::string::npos);
}

}  // namespace
}  // namespace paramd::testing
