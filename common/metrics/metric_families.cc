#include "common/metrics/metric_families.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "prometheus/check_names.h"
#include "prometheus/text_serializer.h"

namespace paramd {
namespace {

void CheckLabelNames(const MetricLabels& labels) {
  for (const auto& label : labels) {
    if (!prometheus::CheckLabelName(label.first)) std::abort();
  }
}

}  // namespace

MetricFamilies::MetricFamilies(MetricLabels common)
    : common_(std::move(common)) {
  CheckLabelNames(common_);
}

void MetricFamilies::Declare(absl::string_view name, MetricType type,
                             absl::string_view help) {
  const std::string n(name);
  if (!prometheus::CheckMetricName(n)) std::abort();
  if (absl::StrContains(help, '\n') || absl::StrContains(help, '\\')) {
    std::abort();  // The library would write a broken HELP line.
  }
  if (type != MetricType::Counter && type != MetricType::Gauge &&
      type != MetricType::Histogram) {
    std::abort();
  }
  for (const prometheus::MetricFamily& f : families_) {
    if (f.name == n) std::abort();  // Declared twice.
  }
  prometheus::MetricFamily family;
  family.name = n;
  family.help = std::string(help);
  family.type = type;
  families_.push_back(std::move(family));
}

prometheus::MetricFamily& MetricFamilies::Find(absl::string_view name) {
  for (prometheus::MetricFamily& f : families_) {
    if (f.name == name) return f;
  }
  std::abort();  // A sample of an undeclared family.
}

std::vector<prometheus::ClientMetric::Label> MetricFamilies::Labels(
    const MetricLabels& labels) const {
  CheckLabelNames(labels);
  std::vector<prometheus::ClientMetric::Label> out;
  out.reserve(common_.size() + labels.size());
  for (const auto& [name, value] : common_) out.push_back({name, value});
  for (const auto& [name, value] : labels) out.push_back({name, value});
  return out;
}

void MetricFamilies::Add(absl::string_view name, const MetricLabels& labels,
                         double value) {
  prometheus::MetricFamily& f = Find(name);
  prometheus::ClientMetric sample;
  sample.label = Labels(labels);
  if (f.type == MetricType::Counter) {
    sample.counter.value = value;
  } else if (f.type == MetricType::Gauge) {
    sample.gauge.value = value;
  } else {
    std::abort();  // A histogram takes AddHistogram.
  }
  f.metric.push_back(std::move(sample));
}

void MetricFamilies::AddHistogram(absl::string_view name,
                                  const MetricLabels& labels,
                                  const HistogramSnapshot& h) {
  prometheus::MetricFamily& f = Find(name);
  if (f.type != MetricType::Histogram) std::abort();
  prometheus::ClientMetric sample;
  sample.label = Labels(labels);
  sample.histogram.sample_count = h.count;
  sample.histogram.sample_sum = h.sum;
  // The library writes the +Inf bucket itself, from sample_count.
  for (size_t i = 0; i < h.upper_bounds.size(); ++i) {
    sample.histogram.bucket.push_back({h.cumulative[i], h.upper_bounds[i]});
  }
  f.metric.push_back(std::move(sample));
}

void AddProcessMetrics(MetricFamilies& families, absl::Time started) {
  families.Declare("process_resident_memory_bytes", MetricType::Gauge,
                   "Resident memory size in bytes.");
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  if (statm >> pages_total >> pages_resident) {
    families.Add("process_resident_memory_bytes", {},
                 static_cast<double>(pages_resident) *
                     static_cast<double>(sysconf(_SC_PAGESIZE)));
  }
  families.Declare(
      "process_start_time_seconds", MetricType::Gauge,
      "Start time of the process since the Unix epoch in seconds.");
  families.Add("process_start_time_seconds", {}, absl::ToUnixSeconds(started));
}

std::string MetricsText(const std::vector<prometheus::MetricFamily>& families) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace paramd
