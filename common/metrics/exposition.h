// MetricsText: writes the Prometheus text exposition format (version
// 0.0.4), the format `promtool check metrics` checks and every Prometheus
// scrapes.
//
// Declare each family once (name, type, help), then add its samples in any
// order; Render() writes each family's HELP and TYPE lines followed by all
// of its samples, families in declaration order. Label values are escaped
// (backslash, double quote, newline), HELP text too (backslash, newline);
// names are checked against Prometheus's grammar, and a bad name is a
// programming error that aborts (names come from code, never from input).
// Not thread-safe: build one per scrape.
#ifndef PARAMD_COMMON_METRICS_EXPOSITION_H_
#define PARAMD_COMMON_METRICS_EXPOSITION_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics/histogram.h"

namespace paramd {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

// The Content-Type of the format.
inline constexpr char kMetricsContentType[] =
    "text/plain; version=0.0.4; charset=utf-8";

class MetricsText {
 public:
  // Labels every sample carries (e.g. job and shard), before its own.
  explicit MetricsText(MetricLabels common = {});

  // Counters' names end in _total, as Prometheus's conventions ask.
  void Declare(absl::string_view name, MetricType type, absl::string_view help);
  // A counter's or gauge's sample. The family must have been declared.
  void Add(absl::string_view name, const MetricLabels& labels, double value);
  // A histogram's _bucket, _sum and _count samples.
  void AddHistogram(absl::string_view name, const MetricLabels& labels,
                    const HistogramSnapshot& histogram);

  std::string Render() const;

  // Formats a sample value as the format wants (+Inf, -Inf, NaN; integers
  // without an exponent up to 2^53).
  static std::string FormatValue(double value);
  static std::string EscapeLabelValue(absl::string_view value);
  static bool ValidMetricName(absl::string_view name);
  static bool ValidLabelName(absl::string_view name);

 private:
  struct Family {
    std::string name;
    MetricType type;
    std::string help;
    std::vector<std::string> lines;
  };
  Family& Find(absl::string_view name);
  std::string LabelText(const MetricLabels& labels,
                        const std::pair<std::string, std::string>* extra) const;

  const MetricLabels common_;
  std::vector<Family> families_;
};

// Declares and adds process_resident_memory_bytes (from /proc/self/statm)
// and process_start_time_seconds (`started`, Unix seconds), the names
// Prometheus's client libraries use.
void AddProcessMetrics(MetricsText& text, absl::Time started);

}  // namespace paramd

#endif  // PARAMD_COMMON_METRICS_EXPOSITION_H_
