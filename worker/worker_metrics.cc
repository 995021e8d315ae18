#include "worker/worker_metrics.h"

#include "absl/strings/str_cat.h"
#include "common/metrics/metric_families.h"

namespace paramd {

// An exchange of the real client, counted as a push and a pull when it
// finishes; its time runs from its start (during the backward pass) to
// then.
class MeteredExchange : public StepExchange {
 public:
  MeteredExchange(std::unique_ptr<StepExchange> inner, WorkerMetrics* m,
                  size_t push_bytes, size_t pull_bytes)
      : inner_(std::move(inner)),
        m_(m),
        push_bytes_(push_bytes),
        pull_bytes_(pull_bytes) {}

  void GradientReady(int64_t begin, int64_t end) override {
    inner_->GradientReady(begin, end);
  }
  absl::Status AwaitParams(int64_t begin, int64_t end) override {
    return inner_->AwaitParams(begin, end);
  }
  absl::StatusOr<uint64_t> Finish() override {
    absl::StatusOr<uint64_t> v = inner_->Finish();
    if (!recorded_) {
      recorded_ = true;
      const absl::Duration d = m_->clock_source_->Now() - start_;
      m_->OnPushPull(d, push_bytes_, pull_bytes_, v.ok());
    }
    return v;
  }

 private:
  std::unique_ptr<StepExchange> inner_;
  WorkerMetrics* const m_;
  const size_t push_bytes_, pull_bytes_;
  const absl::Time start_ = m_->clock_source_->Now();
  bool recorded_ = false;
};

// Passes every call to the real client, timing and counting it.
class MeteredClient : public ParameterClient {
 public:
  MeteredClient(std::unique_ptr<ParameterClient> inner, WorkerMetrics* m)
      : inner_(std::move(inner)), m_(m) {}

  absl::StatusOr<uint64_t> Register() override {
    absl::StatusOr<uint64_t> clock = inner_->Register();
    m_->OnRegister(clock.ok());
    return clock;
  }
  absl::StatusOr<uint64_t> Pull(uint64_t clock,
                                absl::Span<float> params) override {
    const absl::Time start = Now();
    absl::StatusOr<uint64_t> v = inner_->Pull(clock, params);
    m_->OnPull(Now() - start, params.size() * sizeof(float), v.ok());
    return v;
  }
  absl::Span<float> GradientBuffer() override {
    return inner_->GradientBuffer();
  }
  absl::StatusOr<StepReport> Step(StepRequest request) override {
    const absl::Time start = Now();
    const size_t pushed = request.grads.size() * sizeof(float);
    const size_t pulled = request.params.size() * sizeof(float);
    const bool push_only = request.push_only;
    absl::StatusOr<StepReport> report = inner_->Step(std::move(request));
    if (push_only) {
      m_->OnPush(Now() - start, pushed, report.ok());
    } else {
      m_->OnPushPull(Now() - start, pushed, pulled, report.ok());
    }
    return report;
  }
  absl::Status PullRows(uint64_t clock, uint32_t table,
                        absl::Span<const uint64_t> ids,
                        absl::Span<float> out) override {
    const absl::Time start = Now();
    absl::Status s = inner_->PullRows(clock, table, ids, out);
    m_->OnPull(Now() - start, out.size() * sizeof(float), s.ok());
    return s;
  }
  std::unique_ptr<StepExchange> StartPushPull(
      uint64_t clock, absl::Span<const float> grads, float loss,
      absl::Span<float> params) override {
    return std::make_unique<MeteredExchange>(
        inner_->StartPushPull(clock, grads, loss, params), m_,
        grads.size() * sizeof(float), params.size() * sizeof(float));
  }
  void Heartbeat(uint64_t clock, bool finished,
                 absl::Duration timeout) override {
    inner_->Heartbeat(clock, finished, timeout);
  }
  absl::Status ReportEpoch(const EpochReport& report) override {
    absl::Status s = inner_->ReportEpoch(report);
    m_->OnEpoch(report);
    return s;
  }

 private:
  absl::Time Now() const { return m_->clock_source_->Now(); }

  std::unique_ptr<ParameterClient> inner_;
  WorkerMetrics* const m_;
};

WorkerMetrics::WorkerMetrics(std::string job_id, int rank, Clock* clock)
    : job_id_(std::move(job_id)), rank_(rank), clock_source_(clock) {}

ParameterClientFactory WorkerMetrics::Wrap(ParameterClientFactory inner) {
  return [this, inner = std::move(inner)](const ClientSetup& setup)
             -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
    absl::StatusOr<std::unique_ptr<ParameterClient>> client = inner(setup);
    if (!client.ok()) return client.status();
    return std::make_unique<MeteredClient>(*std::move(client), this);
  };
}

void WorkerMetrics::OnStep(uint64_t clock, double loss) {
  steps_.fetch_add(1, std::memory_order_relaxed);
  clock_.store(clock + 1, std::memory_order_relaxed);
  last_loss_.store(loss, std::memory_order_relaxed);
}

void WorkerMetrics::OnRegister(bool ok) {
  if (ok) registrations_.fetch_add(1, std::memory_order_relaxed);
}

void WorkerMetrics::OnPush(absl::Duration d, size_t bytes, bool ok) {
  OnCall(push_seconds_, pushes_, bytes_out_, d, bytes, ok);
}

void WorkerMetrics::OnPull(absl::Duration d, size_t bytes, bool ok) {
  OnCall(pull_seconds_, pulls_, bytes_in_, d, bytes, ok);
}

void WorkerMetrics::OnPushPull(absl::Duration d, size_t push_bytes,
                               size_t pull_bytes, bool ok) {
  OnPush(d, push_bytes, ok);
  OnPull(d, pull_bytes, ok);
}

void WorkerMetrics::OnCall(Histogram& seconds, std::atomic<uint64_t>& calls,
                           std::atomic<uint64_t>& bytes_total, absl::Duration d,
                           size_t bytes, bool ok) {
  if (!ok) {
    failed_calls_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  seconds.Observe(absl::ToDoubleSeconds(d));
  calls.fetch_add(1, std::memory_order_relaxed);
  bytes_total.fetch_add(bytes, std::memory_order_relaxed);
}

void WorkerMetrics::OnEpoch(const EpochReport& r) {
  absl::MutexLock lock(&mu_);
  epoch_ = r.epoch;
  epoch_loss_ = r.train_samples > 0 ? r.train_loss_sum / r.train_samples : 0;
  epoch_accuracy_ =
      r.test_total > 0 ? static_cast<double>(r.test_correct) / r.test_total : 0;
  epoch_samples_per_second_ =
      r.train_seconds > 0 ? r.train_samples / r.train_seconds : 0;
}

std::vector<prometheus::MetricFamily> WorkerMetrics::Families(
    absl::Time process_started) const {
  MetricFamilies text({{"paramd_job", job_id_}, {"rank", absl::StrCat(rank_)}});
  using T = MetricType;
  auto one = [&](const char* name, T type, const char* help, double value) {
    text.Declare(name, type, help);
    text.Add(name, {}, value);
  };
  auto load = [](const std::atomic<uint64_t>& a) {
    return static_cast<double>(a.load(std::memory_order_relaxed));
  };
  one("paramd_worker_steps_total", T::Counter,
      "Training steps this process computed.", load(steps_));
  one("paramd_worker_clock", T::Gauge, "The worker's clock: its next step.",
      load(clock_));
  one("paramd_worker_batch_loss", T::Gauge, "Loss of the last batch.",
      last_loss_.load(std::memory_order_relaxed));
  one("paramd_worker_pushes_total", T::Counter, "Pushes every shard accepted.",
      load(pushes_));
  one("paramd_worker_pulls_total", T::Counter, "Pulls every shard served.",
      load(pulls_));
  one("paramd_worker_failed_calls_total", T::Counter,
      "Pushes and pulls that failed after the client's retries.",
      load(failed_calls_));
  one("paramd_worker_sent_bytes_total", T::Counter,
      "Gradient bytes pushed, as float32 (before compression; all shards).",
      load(bytes_out_));
  one("paramd_worker_received_bytes_total", T::Counter,
      "Parameter bytes pulled, as float32 (before compression; all shards).",
      load(bytes_in_));
  one("paramd_worker_registrations_total", T::Counter,
      "Registrations with the shards (more than 1 after the shards dropped "
      "this rank and it joined again).",
      load(registrations_));
  text.Declare("paramd_worker_push_seconds", T::Histogram,
               "Time of a push (with its pull when they go together) to "
               "every shard, as the worker sees it.");
  text.AddHistogram("paramd_worker_push_seconds", {}, push_seconds_.Snapshot());
  text.Declare("paramd_worker_pull_seconds", T::Histogram,
               "Time of a pull from every shard, as the worker sees it.");
  text.AddHistogram("paramd_worker_pull_seconds", {}, pull_seconds_.Snapshot());
  {
    absl::MutexLock lock(&mu_);
    if (epoch_ > 0) {
      one("paramd_worker_epoch", T::Gauge, "The last epoch this rank ended.",
          epoch_);
      one("paramd_worker_epoch_train_loss", T::Gauge,
          "This rank's mean training loss in its last epoch.", epoch_loss_);
      one("paramd_worker_epoch_test_accuracy", T::Gauge,
          "Accuracy on this rank's share of the test set after its last "
          "epoch.",
          epoch_accuracy_);
      one("paramd_worker_epoch_samples_per_second", T::Gauge,
          "This rank's training samples per second in its last epoch.",
          epoch_samples_per_second_);
    }
  }
  AddProcessMetrics(text, process_started);
  return text.Take();
}

}  // namespace paramd
