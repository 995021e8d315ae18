// Prometheus metrics end to end with the real binaries: a live scrape of
// paramd-server and paramd-worker passes `promtool check metrics`, and a
// real `prometheus` scraping the running job answers queries for paramd's
// series with their labels. Needs Debian's `prometheus` (promtool and the
// server); skips, saying so, without it.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tests/http_stub.h"
#include "tests/skip_main.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd {
namespace testing {

std::string SkipReason() { return MissingPrograms({"promtool", "prometheus"}); }

namespace {

constexpr absl::Duration kTimeout = absl::Seconds(90);

int PortIn(const std::string& path) {
  const std::string text = ReadFileOrEmpty(path);
  REQUIRE(!text.empty());
  return std::stoi(text);
}

// One server and one slow worker of a small job, each serving /metrics on a
// port of its own choosing.
struct MiniJob {
  std::string dir;
  std::unique_ptr<Subprocess> server;
  std::unique_ptr<Subprocess> worker;
  int server_metrics = 0;
  int worker_metrics = 0;

  MiniJob() : dir(NewTempDir()) {
    JobOptions o;
    o.servers = {"127.0.0.1:0"};
    o.workers = 1;
    // 64 steps an epoch at 40 ms: the worker outlives every test case (a
    // loaded machine may take many seconds to start Prometheus) and is
    // killed at its end.
    o.epochs = 400;
    const std::string job = WriteFile(
        dir + "/job.yaml",
        JobYaml(o) + "testing:\n  slow_rank: 0\n  slow_step_ms: 40\n");
    server = std::make_unique<Subprocess>(std::vector<std::string>{
        "server/paramd-server", "--job", job, "--shard", "0", "--listen",
        "127.0.0.1:0", "--metrics_listen", "127.0.0.1:0", "--metrics_port_file",
        dir + "/server.metrics"});
    REQUIRE(server->ReadUntil("metrics at", kTimeout));
    const std::string address = ListeningAddress(*server);
    REQUIRE(!address.empty());
    server_metrics = PortIn(dir + "/server.metrics");
    worker = StartWorker(job, 0, address,
                         {"--metrics_listen", "127.0.0.1:0",
                          "--metrics_port_file", dir + "/worker.metrics"});
    REQUIRE(worker->ReadUntil("metrics at", kTimeout));
    worker_metrics = PortIn(dir + "/worker.metrics");
    // Pushes, pulls and a reported epoch exist once the first epoch ends.
    REQUIRE(worker->ReadUntil("epoch 1/", kTimeout));
  }
};

std::string Scrape(int port) {
  absl::StatusOr<HttpResponse> r = HttpGet("127.0.0.1", port, "/metrics");
  REQUIRE(r.ok());
  CHECK(r->code == 200);
  // prometheus-cpp 1.0.1 sends no version parameter; Prometheus reads a
  // plain text/plain reply as the text format 0.0.4.
  CHECK(absl::StartsWith(r->content_type, "text/plain"));
  return r->body;
}

// Runs promtool check metrics on `text`; returns its exit code and output.
std::pair<int, std::string> Promtool(const std::string& dir,
                                     const std::string& text) {
  const std::string file = WriteFile(dir + "/scrape.txt", text);
  Subprocess promtool({"/bin/sh", "-c",
                       absl::StrCat(FindProgram("promtool"),
                                    " check metrics < ", file, " 2>&1")});
  const int rc = promtool.Wait(kTimeout);
  return {rc, promtool.output()};
}

// The value of the sample written exactly as `series` (name and labels).
double Sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + series.size() + 2));
}

TEST_CASE("promtool accepts a live scrape of a server and of a worker",
          "[prometheus][metrics]") {
  MiniJob job;
  const std::string server = Scrape(job.server_metrics);
  const std::string worker = Scrape(job.worker_metrics);
  for (const std::string* text : {&server, &worker}) {
    auto [rc, out] = Promtool(job.dir, *text);
    INFO(out);
    CHECK(rc == 0);
  }
  const std::string s = R"({paramd_job="test-job",shard="0")";
  CHECK(Sample(server, "paramd_pushes_total" + s + "}") > 0);
  CHECK(Sample(server, "paramd_version" + s + "}") > 0);
  // Uncompressed: the wire bytes are the float32 bytes.
  CHECK(Sample(server, "paramd_received_float32_bytes_total" + s + "}") ==
        Sample(server, "paramd_received_bytes_total" + s + "}"));
  CHECK(Sample(server, "paramd_worker_clock" + s + R"(,rank="0"})") > 0);
  CHECK(Sample(server, "paramd_live_workers" + s + "}") == 1);
  CHECK(Sample(server, "paramd_pull_wait_seconds_count" + s + "}") > 0);
  CHECK(Sample(server, "paramd_push_seconds_bucket" + s + R"(,le="+Inf"})") >
        0);
  CHECK(absl::StrContains(server, "# TYPE paramd_pull_seconds histogram"));
  CHECK(Sample(server, "process_resident_memory_bytes" + s + "}") > 1e6);
  const std::string w = R"({paramd_job="test-job",rank="0")";
  CHECK(Sample(worker, "paramd_worker_steps_total" + w + "}") > 0);
  CHECK(Sample(worker, "paramd_worker_sent_bytes_total" + w + "}") > 0);
  CHECK(Sample(worker, "paramd_worker_push_seconds_count" + w + "}") > 0);
  CHECK(Sample(worker, "paramd_worker_registrations_total" + w + "}") == 1);
  // Health, for probes.
  CHECK(HttpGet("127.0.0.1", job.server_metrics, "/healthz")->body == "ok\n");
}

// A target of the test's own that counts Prometheus's scrapes, so that the
// test waits on scrapes (a condition) rather than on time.
class ScrapeCounter {
 public:
  ScrapeCounter() {
    std::map<std::string, HttpHandler> handlers;
    handlers["/metrics"] = [this] {
      absl::MutexLock lock(&mu_);
      ++scrapes_;
      return HttpResponse{200, "text/plain; version=0.0.4",
                          "# TYPE sentinel gauge\nsentinel 1\n"};
    };
    server_ = *HttpStub::Start(std::move(handlers));
  }
  int port() const { return server_->port(); }
  // Waits for one more scrape than seen so far.
  bool AwaitNext(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    const int target = scrapes_ + 1;
    auto done = [&] {
      mu_.AssertHeld();
      return scrapes_ >= target;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }

 private:
  absl::Mutex mu_;
  int scrapes_ = 0;
  std::unique_ptr<HttpStub> server_;
};

TEST_CASE("a real Prometheus scrapes the job and finds paramd's series",
          "[prometheus][metrics]") {
  MiniJob job;
  ScrapeCounter sentinel;
  const int port = FreePort();
  const std::string config = WriteFile(
      job.dir + "/prometheus.yml",
      absl::StrCat("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                   "scrape_configs:\n"
                   "  - job_name: paramd\n    static_configs:\n"
                   "      - targets: ['127.0.0.1:",
                   job.server_metrics, "', '127.0.0.1:", job.worker_metrics,
                   "', '127.0.0.1:", sentinel.port(), "']\n"));
  Subprocess prometheus(
      {FindProgram("prometheus"), "--config.file=" + config,
       "--storage.tsdb.path=" + job.dir + "/tsdb",
       absl::StrCat("--web.listen-address=127.0.0.1:", port)});
  REQUIRE(prometheus.ReadUntil("Server is ready to receive web requests",
                               kTimeout));
  auto query = [&](const std::string& q) {
    absl::StatusOr<HttpResponse> r =
        HttpGet("127.0.0.1", port, "/api/v1/query?query=" + q);
    return r.ok() ? r->body : std::string();
  };
  // Each round: one more scrape of every target, then ask.
  std::string server, worker;
  for (int round = 0; round < 30; ++round) {
    REQUIRE(sentinel.AwaitNext(absl::Seconds(20)));
    server = query("paramd_pushes_total");
    worker = query("paramd_worker_steps_total");
    if (absl::StrContains(server, "\"shard\":\"0\"") &&
        absl::StrContains(worker, "\"rank\":\"0\"")) {
      break;
    }
  }
  INFO(server);
  INFO(worker);
  CHECK(absl::StrContains(server, R"("status":"success")"));
  CHECK(absl::StrContains(server, R"("__name__":"paramd_pushes_total")"));
  CHECK(absl::StrContains(server, R"("paramd_job":"test-job")"));
  CHECK(absl::StrContains(server, R"("shard":"0")"));
  // Prometheus's own target labels sit beside paramd's.
  CHECK(absl::StrContains(server, R"("job":"paramd")"));
  CHECK(absl::StrContains(server, absl::StrCat(R"("instance":"127.0.0.1:)",
                                               job.server_metrics, "\"")));
  CHECK(absl::StrContains(worker, R"("__name__":"paramd_worker_steps_total")"));
  CHECK(absl::StrContains(worker, R"("rank":"0")"));
  const std::string buckets = query("paramd_pull_wait_seconds_bucket");
  CHECK(absl::StrContains(buckets, R"("le":"+Inf")"));
}

}  // namespace
}  // namespace testing
}  // namespace paramd
