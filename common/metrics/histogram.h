// Histogram: counts of observations in fixed buckets, for Prometheus
// histograms (latencies in seconds). Observe is lock-free; a snapshot is
// consistent enough for monitoring (each bucket and the sum are read once,
// not under one lock). Thread-safe.
#ifndef PARAMD_COMMON_METRICS_HISTOGRAM_H_
#define PARAMD_COMMON_METRICS_HISTOGRAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace paramd {

struct HistogramSnapshot {
  std::vector<double> upper_bounds;  // Ascending; +Inf is implicit.
  // cumulative[i]: observations <= upper_bounds[i]; one more entry for
  // +Inf, which equals count.
  std::vector<uint64_t> cumulative;
  double sum = 0;
  uint64_t count = 0;
};

class Histogram {
 public:
  // `upper_bounds` must be ascending and finite (checked: a bad list is a
  // programming error and aborts).
  explicit Histogram(std::vector<double> upper_bounds);

  // 100 µs to 10 s, for RPC latencies and waits in seconds.
  static std::vector<double> LatencyBuckets();

  // NaN is ignored; +Inf counts in the +Inf bucket only.
  void Observe(double value);
  HistogramSnapshot Snapshot() const;

 private:
  const std::vector<double> upper_bounds_;
  // One per bound, then +Inf; non-cumulative.
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

}  // namespace paramd

#endif  // PARAMD_COMMON_METRICS_HISTOGRAM_H_
