// MetricFamilies and Histogram: the samples of a scrape as prometheus-cpp's
// serializer writes them.
#include "common/metrics/metric_families.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "common/metrics/histogram.h"

namespace paramd {
namespace {

TEST_CASE("families keep their samples together, in declaration order",
          "[metrics]") {
  MetricFamilies text(MetricLabels{{"job", "j"}});
  text.Declare("a_total", MetricType::Counter, "A's help.");
  text.Declare("b", MetricType::Gauge, "B.");
  text.Add("b", {{"rank", "1"}}, 2.5);
  text.Add("a_total", {}, 3);
  text.Add("b", {{"rank", "0"}}, -1);
  CHECK(MetricsText(text.families()) ==
        "# HELP a_total A's help.\n"
        "# TYPE a_total counter\n"
        "a_total{job=\"j\"} 3\n"
        "# HELP b B.\n"
        "# TYPE b gauge\n"
        "b{job=\"j\",rank=\"1\"} 2.5\n"
        "b{job=\"j\",rank=\"0\"} -1\n");
}

TEST_CASE("label values are escaped; large counters stay exact", "[metrics]") {
  MetricFamilies text;
  text.Declare("m", MetricType::Gauge, "M.");
  text.Add("m", {{"path", "a\"b\\c\nd"}}, 1);
  text.Declare("n_total", MetricType::Counter, "N.");
  text.Add("n_total", {}, 12345678901234.0);
  text.Add("n_total", {{"x", "inf"}}, std::numeric_limits<double>::infinity());
  const std::string out = MetricsText(text.families());
  CHECK(absl::StrContains(out, "m{path=\"a\\\"b\\\\c\\nd\"} 1\n"));
  CHECK(absl::StrContains(out, "n_total 12345678901234\n"));
  CHECK(absl::StrContains(out, "n_total{x=\"inf\"} +Inf\n"));
}

TEST_CASE("a histogram's buckets are cumulative and end in +Inf", "[metrics]") {
  Histogram h({0.1, 1, 10});
  for (double v :
       {0.05, 0.1, 0.5, 2.0, 100.0, std::numeric_limits<double>::infinity()}) {
    h.Observe(v);
  }
  h.Observe(std::nan(""));  // Ignored.
  const HistogramSnapshot s = h.Snapshot();
  CHECK(s.cumulative == std::vector<uint64_t>{2, 3, 4, 6});
  CHECK(s.count == 6);
  CHECK(std::isinf(s.sum));

  Histogram finite({1, 2});
  finite.Observe(0.5);
  finite.Observe(1.5);
  finite.Observe(3);
  MetricFamilies text(MetricLabels{{"shard", "0"}});
  text.Declare("t_seconds", MetricType::Histogram, "T.");
  text.AddHistogram("t_seconds", {{"rank", "2"}}, finite.Snapshot());
  const std::string out = MetricsText(text.families());
  CHECK(absl::StartsWith(out,
                         "# HELP t_seconds T.\n"
                         "# TYPE t_seconds histogram\n"));
  for (const char* line :
       {"t_seconds_bucket{shard=\"0\",rank=\"2\",le=\"1\"} 1\n",
        "t_seconds_bucket{shard=\"0\",rank=\"2\",le=\"2\"} 2\n",
        "t_seconds_bucket{shard=\"0\",rank=\"2\",le=\"+Inf\"} 3\n",
        "t_seconds_sum{shard=\"0\",rank=\"2\"} 5\n",
        "t_seconds_count{shard=\"0\",rank=\"2\"} 3\n"}) {
    INFO(out);
    CHECK(absl::StrContains(out, line));
  }
}

TEST_CASE("process metrics name the resident memory and the start time",
          "[metrics]") {
  MetricFamilies text;
  AddProcessMetrics(text, absl::FromUnixSeconds(1700000000));
  const std::string out = MetricsText(text.families());
  CHECK(absl::StrContains(out, "process_start_time_seconds 1700000000\n"));
  CHECK(absl::StrContains(out, "# TYPE process_resident_memory_bytes gauge"));
  CHECK_FALSE(absl::StrContains(out, "process_resident_memory_bytes 0\n"));
}

}  // namespace
}  // namespace paramd
