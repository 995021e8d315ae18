// MetricsEndpoint over real sockets on 127.0.0.1 (port 0): /metrics from
// the collector at each scrape, /healthz for probes, clear errors for an
// address it cannot serve.
#include "common/metrics/metrics_endpoint.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics/metric_families.h"
#include "tests/http_stub.h"

namespace paramd {
namespace {

using testing::HttpGet;
using testing::HttpResponse;

// Counts the scrapes it answers; each answer carries the count.
class Counted {
 public:
  std::vector<prometheus::MetricFamily> Collect() {
    absl::MutexLock lock(&mu_);
    MetricFamilies families;
    families.Declare("scrapes_total", MetricType::Counter, "Scrapes.");
    families.Add("scrapes_total", {}, ++scrapes_);
    return families.Take();
  }

 private:
  absl::Mutex mu_;
  int scrapes_ ABSL_GUARDED_BY(mu_) = 0;
};

std::unique_ptr<MetricsEndpoint> Serve(Counted& counted) {
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
      MetricsEndpoint::Start("127.0.0.1:0",
                             [&counted] { return counted.Collect(); });
  REQUIRE(endpoint.ok());
  REQUIRE((*endpoint)->port() > 0);
  return *std::move(endpoint);
}

TEST_CASE("each scrape of /metrics collects anew", "[metrics][http]") {
  Counted counted;
  std::unique_ptr<MetricsEndpoint> endpoint = Serve(counted);
  absl::StatusOr<HttpResponse> first =
      HttpGet("127.0.0.1", endpoint->port(), "/metrics");
  REQUIRE(first.ok());
  CHECK(first->code == 200);
  CHECK(absl::StartsWith(first->content_type, "text/plain"));
  CHECK(absl::StrContains(first->body, "\nscrapes_total 1\n"));
  absl::StatusOr<HttpResponse> second =
      HttpGet("127.0.0.1", endpoint->port(), "/metrics?x=1");
  REQUIRE(second.ok());
  CHECK(absl::StrContains(second->body, "\nscrapes_total 2\n"));
}

TEST_CASE("/healthz answers ok without collecting; other paths are 404",
          "[metrics][http]") {
  Counted counted;
  std::unique_ptr<MetricsEndpoint> endpoint = Serve(counted);
  absl::StatusOr<HttpResponse> health =
      HttpGet("127.0.0.1", endpoint->port(), "/healthz");
  REQUIRE(health.ok());
  CHECK(health->code == 200);
  CHECK(health->body == "ok\n");
  CHECK(HttpGet("127.0.0.1", endpoint->port(), "/nothing")->code == 404);
  // The probe did not count as a scrape.
  CHECK(absl::StrContains(
      HttpGet("127.0.0.1", endpoint->port(), "/metrics")->body,
      "\nscrapes_total 1\n"));
}

TEST_CASE("a port in use and a bad address are errors; Stop ends serving",
          "[metrics][http]") {
  Counted counted;
  std::unique_ptr<MetricsEndpoint> endpoint = Serve(counted);
  const std::string taken = "127.0.0.1:" + std::to_string(endpoint->port());
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> second =
      MetricsEndpoint::Start(
          taken, [] { return std::vector<prometheus::MetricFamily>(); });
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(second.status().message(), taken));
  for (const char* bad : {"nonsense", "[::1]:0", "127.0.0.1:70000", ":9400"}) {
    INFO(bad);
    absl::StatusOr<std::unique_ptr<MetricsEndpoint>> refused =
        MetricsEndpoint::Start(
            bad, [] { return std::vector<prometheus::MetricFamily>(); });
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(absl::StrContains(refused.status().message(), bad));
  }
  const int port = endpoint->port();
  endpoint->Stop();
  endpoint->Stop();  // Idempotent.
  CHECK_FALSE(HttpGet("127.0.0.1", port, "/metrics").ok());
}

}  // namespace
}  // namespace paramd
