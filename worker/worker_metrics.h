// WorkerMetrics: one worker's Prometheus metrics (GET /metrics of
// paramd-worker). It sees the worker through a ParameterClient that wraps
// the real one (every push, pull, registration and epoch report passes
// through it, timed) and through the trainer's per-step callback (the batch
// loss). Every sample is labelled job and rank. Calls are timed on a Clock
// (a FakeClock in tests). Thread-safe.
#ifndef PARAMD_WORKER_WORKER_METRICS_H_
#define PARAMD_WORKER_WORKER_METRICS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/base/epoch_report.h"
#include "common/metrics/histogram.h"
#include "prometheus/metric_family.h"
#include "worker/parameter_client.h"

namespace paramd {

class WorkerMetrics {
 public:
  // Calls are timed on `clock`, which outlives this.
  WorkerMetrics(std::string job_id, int rank, Clock* clock = RealClock());

  // A factory whose clients are `inner`'s, with every call recorded here.
  // This object must outlive the clients.
  ParameterClientFactory Wrap(ParameterClientFactory inner);

  // The trainer's on_step: a step at `clock` with this batch loss.
  void OnStep(uint64_t clock, double loss);

  // This process's samples now, for a scrape (thread-safe).
  std::vector<prometheus::MetricFamily> Families(
      absl::Time process_started) const;

 private:
  friend class MeteredClient;
  friend class MeteredExchange;
  void OnRegister(bool ok);
  void OnPush(absl::Duration d, size_t bytes, bool ok);
  void OnPull(absl::Duration d, size_t bytes, bool ok);
  // One round trip (a PushPull, an overlapped exchange): counted as a push
  // and a pull, each taking the whole time.
  void OnPushPull(absl::Duration d, size_t push_bytes, size_t pull_bytes,
                  bool ok);
  // A push or a pull into its histogram and counters; a failed one counts
  // in failed_calls_ only.
  void OnCall(Histogram& seconds, std::atomic<uint64_t>& calls,
              std::atomic<uint64_t>& bytes_total, absl::Duration d,
              size_t bytes, bool ok);
  void OnEpoch(const EpochReport& report);

  const std::string job_id_;
  const int rank_;
  Clock* const clock_source_;
  Histogram push_seconds_{Histogram::LatencyBuckets()};
  Histogram pull_seconds_{Histogram::LatencyBuckets()};
  std::atomic<uint64_t> steps_{0};
  std::atomic<uint64_t> clock_{0};
  std::atomic<double> last_loss_{0};
  std::atomic<uint64_t> pushes_{0};
  std::atomic<uint64_t> pulls_{0};
  std::atomic<uint64_t> failed_calls_{0};
  std::atomic<uint64_t> bytes_out_{0};
  std::atomic<uint64_t> bytes_in_{0};
  std::atomic<uint64_t> registrations_{0};

  mutable absl::Mutex mu_;
  int epoch_ ABSL_GUARDED_BY(mu_) = 0;  // The last reported; 0: none.
  double epoch_loss_ ABSL_GUARDED_BY(mu_) = 0;
  double epoch_accuracy_ ABSL_GUARDED_BY(mu_) = 0;
  double epoch_samples_per_second_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_WORKER_METRICS_H_
