// Heartbeats: sent from their own thread with the clock last set, never
// marked finished, and Stop reports whether it stopped a running thread.
#include "worker/heartbeats.h"

#include <catch2/catch.hpp>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace paramd {
namespace {

// Records heartbeats; every other call fails.
class RecordingClient : public ParameterClient {
 public:
  absl::StatusOr<uint64_t> Register() override { return Unused(); }
  absl::StatusOr<uint64_t> Pull(uint64_t, absl::Span<float>) override {
    return Unused();
  }
  absl::Span<float> GradientBuffer() override { return {}; }
  absl::StatusOr<StepReport> Step(StepRequest) override {
    return Unused();
  }
  absl::Status PullRows(uint64_t, uint32_t, absl::Span<const uint64_t>,
                        absl::Span<float>) override {
    return Unused();
  }
  absl::Status ReportEpoch(const EpochReport&) override { return Unused(); }
  void Heartbeat(uint64_t clock, bool finished, absl::Duration) override {
    absl::MutexLock lock(&mu);
    sent.push_back({clock, finished});
  }

  // Waits (up to a minute) until a heartbeat carried `clock`.
  bool AwaitClock(uint64_t clock) {
    absl::MutexLock lock(&mu);
    auto seen = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      for (const auto& h : sent) {
        if (h.first == clock) return true;
      }
      return false;
    };
    return mu.AwaitWithTimeout(absl::Condition(&seen), absl::Minutes(1));
  }

  absl::Mutex mu;
  std::vector<std::pair<uint64_t, bool>> sent ABSL_GUARDED_BY(mu);

 private:
  static absl::Status Unused() { return absl::UnimplementedError("unused"); }
};

TEST_CASE("heartbeats carry the clock last set until stopped", "[heartbeats]") {
  RecordingClient client;
  Heartbeats beats(&client, absl::Milliseconds(1));
  CHECK_FALSE(beats.Stop());  // Not started.
  beats.SetClock(3);
  CHECK(beats.clock() == 3);
  beats.Start();
  beats.Start();  // Once.
  REQUIRE(client.AwaitClock(3));
  beats.SetClock(7);
  REQUIRE(client.AwaitClock(7));
  CHECK(beats.Stop());
  CHECK_FALSE(beats.Stop());
  absl::MutexLock lock(&client.mu);
  for (const auto& h : client.sent) {
    CHECK_FALSE(h.second);  // The finished one is the caller's to send.
    CHECK((h.first == 3 || h.first == 7));
  }
}

}  // namespace
}  // namespace paramd
