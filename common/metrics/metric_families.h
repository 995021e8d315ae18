// MetricFamilies: the samples of one scrape, built as prometheus-cpp's
// MetricFamily values, which the library's serializer writes in the text
// exposition format that every Prometheus scrapes.
//
// paramd's metrics are read from the state they describe when a scrape
// comes (a shard's status, a worker's counters), the way a custom collector
// works in Prometheus's other client libraries; nothing is mirrored into
// long-lived metric objects. Declare each family once (name, type, help),
// then add its samples in any order; families keep declaration order.
//
// Names, label names and help text come from code, never from input: a
// name outside Prometheus's grammar, a family declared twice, a sample of
// an undeclared family or of the wrong kind, and help text holding a
// newline or a backslash (prometheus-cpp 1.0.1 writes HELP unescaped) are
// programming errors that abort. Label values may be anything; the library
// escapes them. Not thread-safe: build one per scrape.
#ifndef PARAMD_COMMON_METRICS_METRIC_FAMILIES_H_
#define PARAMD_COMMON_METRICS_METRIC_FAMILIES_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/metrics/histogram.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"

namespace paramd {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;
using MetricType = prometheus::MetricType;

class MetricFamilies {
 public:
  // Labels every sample carries (e.g. job and shard), before its own.
  explicit MetricFamilies(MetricLabels common = {});

  // Counters' names end in _total, as Prometheus's conventions ask. Only
  // counters, gauges and histograms are used.
  void Declare(absl::string_view name, MetricType type, absl::string_view help);
  // A counter's or gauge's sample. The family must have been declared.
  void Add(absl::string_view name, const MetricLabels& labels, double value);
  // A histogram's buckets, sum and count.
  void AddHistogram(absl::string_view name, const MetricLabels& labels,
                    const HistogramSnapshot& histogram);

  const std::vector<prometheus::MetricFamily>& families() const {
    return families_;
  }
  std::vector<prometheus::MetricFamily> Take() { return std::move(families_); }

 private:
  prometheus::MetricFamily& Find(absl::string_view name);
  std::vector<prometheus::ClientMetric::Label> Labels(
      const MetricLabels& labels) const;

  const MetricLabels common_;
  std::vector<prometheus::MetricFamily> families_;
};

// Declares and adds process_resident_memory_bytes (from /proc/self/statm)
// and process_start_time_seconds (`started`, Unix seconds), the names
// Prometheus's client libraries use.
void AddProcessMetrics(MetricFamilies& families, absl::Time started);

// The text exposition format of `families`, as a scrape receives it.
std::string MetricsText(const std::vector<prometheus::MetricFamily>& families);

}  // namespace paramd

#endif  // PARAMD_COMMON_METRICS_METRIC_FAMILIES_H_
