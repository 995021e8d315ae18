// MetricsText and Histogram: the Prometheus text format as written.
#include "common/metrics/exposition.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "absl/strings/match.h"
#include "common/metrics/histogram.h"

namespace paramd {
namespace {

TEST_CASE("families keep their samples together, in declaration order",
          "[metrics]") {
  MetricsText text(MetricLabels{{"job", "j"}});
  text.Declare("a_total", MetricType::kCounter, "A's help.");
  text.Declare("b", MetricType::kGauge, "B.");
  text.Add("b", {{"rank", "1"}}, 2.5);
  text.Add("a_total", {}, 3);
  text.Add("b", {{"rank", "0"}}, -1);
  CHECK(text.Render() ==
        "# HELP a_total A's help.\n"
        "# TYPE a_total counter\n"
        "a_total{job=\"j\"} 3\n"
        "# HELP b B.\n"
        "# TYPE b gauge\n"
        "b{job=\"j\",rank=\"1\"} 2.5\n"
        "b{job=\"j\",rank=\"0\"} -1\n");
}

TEST_CASE("label values and help text are escaped", "[metrics]") {
  MetricsText text;
  text.Declare("m", MetricType::kGauge, "line one\nback\\slash");
  text.Add("m", {{"path", "a\"b\\c\nd"}}, 1);
  CHECK(text.Render() ==
        "# HELP m line one\\nback\\\\slash\n"
        "# TYPE m gauge\n"
        "m{path=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST_CASE("values: integers exactly, fractions round-trip, specials by name",
          "[metrics]") {
  CHECK(MetricsText::FormatValue(0) == "0");
  CHECK(MetricsText::FormatValue(12345678901234.0) == "12345678901234");
  CHECK(MetricsText::FormatValue(0.0001) == "0.0001");
  CHECK(MetricsText::FormatValue(0.1 + 0.2) == "0.30000000000000004");
  CHECK(std::strtod(MetricsText::FormatValue(1.0 / 3).c_str(), nullptr) ==
        1.0 / 3);
  CHECK(MetricsText::FormatValue(std::numeric_limits<double>::infinity()) ==
        "+Inf");
  CHECK(MetricsText::FormatValue(-std::numeric_limits<double>::infinity()) ==
        "-Inf");
  CHECK(MetricsText::FormatValue(std::nan("")) == "NaN");
  CHECK(MetricsText::FormatValue(1e300) == "1e+300");
}

TEST_CASE("names follow Prometheus's grammar", "[metrics]") {
  CHECK(MetricsText::ValidMetricName("paramd_pushes_total"));
  CHECK(MetricsText::ValidMetricName("ns:rule_name"));
  CHECK_FALSE(MetricsText::ValidMetricName("9lives"));
  CHECK_FALSE(MetricsText::ValidMetricName("has-dash"));
  CHECK_FALSE(MetricsText::ValidMetricName(""));
  CHECK(MetricsText::ValidLabelName("rank"));
  CHECK_FALSE(MetricsText::ValidLabelName("a:b"));
  CHECK_FALSE(MetricsText::ValidLabelName("__reserved"));
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
  MetricsText text(MetricLabels{{"shard", "0"}});
  text.Declare("t_seconds", MetricType::kHistogram, "T.");
  text.AddHistogram("t_seconds", {{"rank", "2"}}, finite.Snapshot());
  CHECK(text.Render() ==
        "# HELP t_seconds T.\n"
        "# TYPE t_seconds histogram\n"
        "t_seconds_bucket{shard=\"0\",rank=\"2\",le=\"1\"} 1\n"
        "t_seconds_bucket{shard=\"0\",rank=\"2\",le=\"2\"} 2\n"
        "t_seconds_bucket{shard=\"0\",rank=\"2\",le=\"+Inf\"} 3\n"
        "t_seconds_sum{shard=\"0\",rank=\"2\"} 5\n"
        "t_seconds_count{shard=\"0\",rank=\"2\"} 3\n");
}

TEST_CASE("process metrics name the resident memory and the start time",
          "[metrics]") {
  MetricsText text;
  AddProcessMetrics(text, absl::FromUnixSeconds(1700000000));
  const std::string out = text.Render();
  CHECK(absl::StrContains(out, "process_start_time_seconds 1700000000\n"));
  CHECK(absl::StrContains(out, "# TYPE process_resident_memory_bytes gauge"));
  CHECK_FALSE(absl::StrContains(out, "process_resident_memory_bytes 0\n"));
}

}  // namespace
}  // namespace paramd
