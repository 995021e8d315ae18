// Small running statistics for a shard's status: pull-wait percentiles
// over recent pulls, pushes per second over a recent window, and
// histograms of push, pull and pull-wait times for its metrics.
// Thread-safe.
#ifndef PARAMD_SERVER_STATS_SHARD_STATS_H_
#define PARAMD_SERVER_STATS_SHARD_STATS_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/histogram.h"

namespace paramd {

class ShardStats {
 public:
  // How many recent pull waits the percentiles cover, and the window of
  // the push rate.
  static constexpr size_t kWaitSamples = 4096;
  static constexpr absl::Duration kRateWindow = absl::Seconds(5);

  void RecordPullWait(absl::Duration wait);
  void RecordPush(absl::Time now);
  // Time inside the shard: a push from its check to its apply, a pull from
  // its arrival to its snapshot (waiting included).
  void RecordPushTime(absl::Duration d) {
    push_seconds_.Observe(absl::ToDoubleSeconds(d));
  }
  void RecordPullTime(absl::Duration d) {
    pull_seconds_.Observe(absl::ToDoubleSeconds(d));
  }
  // An applied push's gradient bytes as float32 (whatever the wire dtype).
  void RecordPushFloat32Bytes(uint64_t bytes) {
    push_float32_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  }
  uint64_t push_float32_bytes() const {
    return push_float32_bytes_.load(std::memory_order_relaxed);
  }
  // Chunk bytes a same-host StepStream moved through shared memory.
  void RecordSharedMemoryBytes(uint64_t in, uint64_t out) {
    shared_in_.fetch_add(in, std::memory_order_relaxed);
    shared_out_.fetch_add(out, std::memory_order_relaxed);
  }
  uint64_t shared_memory_bytes_in() const {
    return shared_in_.load(std::memory_order_relaxed);
  }
  uint64_t shared_memory_bytes_out() const {
    return shared_out_.load(std::memory_order_relaxed);
  }
  const Histogram& push_seconds() const { return push_seconds_; }
  const Histogram& pull_seconds() const { return pull_seconds_; }
  const Histogram& pull_wait_seconds() const { return pull_wait_seconds_; }

  // The p-th percentile (0..100) of recent pull waits, in ms; 0 if none.
  double PullWaitMs(double p) const;
  // Over the last kRateWindow, or since the first push if that is shorter.
  double PushesPerSecond(absl::Time now) const;

 private:
  std::atomic<uint64_t> push_float32_bytes_{0};
  std::atomic<uint64_t> shared_in_{0}, shared_out_{0};
  Histogram push_seconds_{Histogram::LatencyBuckets()};
  Histogram pull_seconds_{Histogram::LatencyBuckets()};
  Histogram pull_wait_seconds_{Histogram::LatencyBuckets()};

  mutable absl::Mutex mu_;
  std::vector<double> waits_ms_ ABSL_GUARDED_BY(mu_);  // ring buffer
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<absl::Time> pushes_ ABSL_GUARDED_BY(mu_);
  absl::Time first_push_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STATS_SHARD_STATS_H_
