// WorkerMetrics: what a worker's /metrics says about the calls its client
// made, timed on a FakeClock that the fake client's calls advance.
#include "worker/worker_metrics.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "common/config/job_config.h"

namespace paramd {
namespace {

// Each call takes `took` on the fake clock and ends with `result`.
class TimedClient final : public ParameterClient {
 public:
  TimedClient(FakeClock* clock, absl::Duration took, absl::Status result)
      : clock_(clock), took_(took), result_(std::move(result)) {}

  absl::StatusOr<uint64_t> Register() override { return Answer(); }
  absl::StatusOr<uint64_t> Pull(uint64_t, absl::Span<float>) override {
    return Answer();
  }
  absl::Span<float> GradientBuffer() override { return absl::MakeSpan(buf_); }
  absl::StatusOr<StepReport> Step(StepRequest) override {
    absl::StatusOr<uint64_t> version = Answer();
    if (!version.ok()) return version.status();
    return StepReport{*version, {}};
  }
  absl::Status PullRows(uint64_t, uint32_t, absl::Span<const uint64_t>,
                        absl::Span<float>) override {
    return Answer().status();
  }
  void Heartbeat(uint64_t, bool, absl::Duration) override {}
  absl::Status ReportEpoch(const EpochReport&) override { return result_; }

 private:
  absl::StatusOr<uint64_t> Answer() {
    clock_->Advance(took_);
    if (!result_.ok()) return result_;
    return 7;
  }

  FakeClock* const clock_;
  const absl::Duration took_;
  const absl::Status result_;
  std::vector<float> buf_ = std::vector<float>(4);
};

// A push-only step of clock 0.
absl::StatusOr<StepReport> Push(ParameterClient& client,
                                const std::vector<float>& grads) {
  StepRequest request{0, grads, 1.0f};
  request.push_only = true;
  return client.Step(std::move(request));
}

// A step of clock 0 that pulls into `params`.
absl::StatusOr<StepReport> PushPull(ParameterClient& client,
                                    const std::vector<float>& grads,
                                    std::vector<float>& params) {
  return client.Step({0, grads, 1.0f, absl::MakeSpan(params)});
}

// The one sample of family `name` (labelled job and rank).
const prometheus::ClientMetric& Sample(
    const std::vector<prometheus::MetricFamily>& families,
    const std::string& name) {
  for (const prometheus::MetricFamily& f : families) {
    if (f.name == name) {
      REQUIRE(f.metric.size() == 1);
      return f.metric[0];
    }
  }
  FAIL("no family " << name);
  static prometheus::ClientMetric none;
  return none;
}

struct Fixture {
  explicit Fixture(absl::Duration took, absl::Status result = absl::OkStatus())
      : metrics("j", 3, &clock) {
    ParameterClientFactory inner = [this, took, result](const ClientSetup&)
        -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
      return std::make_unique<TimedClient>(&clock, took, result);
    };
    client = *metrics.Wrap(inner)(ClientSetup{&config, nullptr, nullptr, 3});
  }
  std::vector<prometheus::MetricFamily> Scrape() const {
    return metrics.Families(absl::Now());
  }

  FakeClock clock;
  JobConfig config;
  WorkerMetrics metrics;
  std::unique_ptr<ParameterClient> client;
};

TEST_CASE(
    "pushes and pulls are timed on the clock and counted with their "
    "bytes",
    "[metrics][worker]") {
  Fixture f(absl::Milliseconds(3));
  std::vector<float> grads(10), params(6);
  REQUIRE(Push(*f.client, grads).ok());
  REQUIRE(f.client->Pull(1, absl::MakeSpan(params)).ok());
  REQUIRE(f.client->Pull(1, absl::MakeSpan(params)).ok());
  const auto families = f.Scrape();
  const auto& push = Sample(families, "paramd_worker_push_seconds").histogram;
  CHECK(push.sample_count == 1);
  CHECK(push.sample_sum == Approx(0.003));
  const auto& pull = Sample(families, "paramd_worker_pull_seconds").histogram;
  CHECK(pull.sample_count == 2);
  CHECK(pull.sample_sum == Approx(0.006));
  CHECK(Sample(families, "paramd_worker_pushes_total").counter.value == 1);
  CHECK(Sample(families, "paramd_worker_pulls_total").counter.value == 2);
  CHECK(Sample(families, "paramd_worker_sent_bytes_total").counter.value ==
        10 * 4);
  CHECK(Sample(families, "paramd_worker_received_bytes_total").counter.value ==
        2 * 6 * 4);
  CHECK(Sample(families, "paramd_worker_failed_calls_total").counter.value ==
        0);
}

TEST_CASE("a step counts as a push and a pull, each taking the whole time",
          "[metrics][worker]") {
  Fixture f(absl::Milliseconds(8));
  std::vector<float> grads(10), params(10);
  REQUIRE(PushPull(*f.client, grads, params).ok());
  const auto families = f.Scrape();
  CHECK(Sample(families, "paramd_worker_push_seconds").histogram.sample_sum ==
        Approx(0.008));
  CHECK(Sample(families, "paramd_worker_pull_seconds").histogram.sample_sum ==
        Approx(0.008));
  CHECK(Sample(families, "paramd_worker_pushes_total").counter.value == 1);
  CHECK(Sample(families, "paramd_worker_pulls_total").counter.value == 1);
}

TEST_CASE("an overlapped exchange is timed from its start to its finish",
          "[metrics][worker]") {
  Fixture f(absl::Milliseconds(2));
  std::vector<float> grads(10), params(10);
  std::unique_ptr<StepExchange> exchange =
      f.client->StartPushPull(0, grads, 1.0f, absl::MakeSpan(params));
  f.clock.Advance(absl::Milliseconds(5));  // The backward pass goes on.
  REQUIRE(exchange->Finish().ok());
  REQUIRE(exchange->Finish().ok());  // Recorded once.
  const auto families = f.Scrape();
  const auto& push = Sample(families, "paramd_worker_push_seconds").histogram;
  CHECK(push.sample_count == 1);
  CHECK(push.sample_sum == Approx(0.007));
  CHECK(Sample(families, "paramd_worker_pulls_total").counter.value == 1);
}

TEST_CASE("a failed call counts as failed only", "[metrics][worker]") {
  Fixture f(absl::Milliseconds(4), absl::UnavailableError("no server"));
  std::vector<float> grads(10), params(10);
  CHECK_FALSE(Push(*f.client, grads).ok());
  CHECK_FALSE(PushPull(*f.client, grads, params).ok());
  CHECK_FALSE(f.client->Register().ok());
  const auto families = f.Scrape();
  // A step with a pull is a push and a pull: two failed calls.
  CHECK(Sample(families, "paramd_worker_failed_calls_total").counter.value ==
        3);
  CHECK(Sample(families, "paramd_worker_pushes_total").counter.value == 0);
  CHECK(Sample(families, "paramd_worker_push_seconds").histogram.sample_count ==
        0);
  CHECK(Sample(families, "paramd_worker_registrations_total").counter.value ==
        0);
}

TEST_CASE("registrations, steps and the last epoch's figures",
          "[metrics][worker]") {
  Fixture f(absl::Milliseconds(1));
  REQUIRE(f.client->Register().ok());
  REQUIRE(f.client->Register().ok());
  f.metrics.OnStep(41, 0.25);
  EpochReport report;
  report.epoch = 2;
  report.train_loss_sum = 30;
  report.train_samples = 60;
  report.train_seconds = 3;
  report.test_correct = 9;
  report.test_total = 10;
  REQUIRE(f.client->ReportEpoch(report).ok());
  const auto families = f.Scrape();
  CHECK(Sample(families, "paramd_worker_registrations_total").counter.value ==
        2);
  CHECK(Sample(families, "paramd_worker_clock").gauge.value == 42);
  CHECK(Sample(families, "paramd_worker_batch_loss").gauge.value == 0.25);
  CHECK(Sample(families, "paramd_worker_epoch").gauge.value == 2);
  CHECK(Sample(families, "paramd_worker_epoch_train_loss").gauge.value ==
        Approx(0.5));
  CHECK(Sample(families, "paramd_worker_epoch_test_accuracy").gauge.value ==
        Approx(0.9));
  CHECK(
      Sample(families, "paramd_worker_epoch_samples_per_second").gauge.value ==
      Approx(20));
  for (const prometheus::MetricFamily& family : families) {
    for (const prometheus::ClientMetric& m : family.metric) {
      bool job = false, rank = false;
      for (const auto& label : m.label) {
        job |= label.name == "paramd_job" && label.value == "j";
        rank |= label.name == "rank" && label.value == "3";
      }
      INFO(family.name);
      CHECK(job);
      CHECK(rank);
    }
  }
}

}  // namespace
}  // namespace paramd
