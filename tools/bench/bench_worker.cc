#include "tools/bench/bench_worker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/rpc/credentials.h"
#include "tools/bench/bench_util.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd {

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kPush:
      return "push";
    case Mode::kPull:
      return "pull";
    case Mode::kPushPull:
      return "push+pull";
  }
  return "?";
}

absl::StatusOr<std::vector<Mode>> ParseModes(const std::string& text) {
  std::vector<Mode> modes;
  for (absl::string_view m : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    if (m == "push") {
      modes.push_back(Mode::kPush);
    } else if (m == "pull") {
      modes.push_back(Mode::kPull);
    } else if (m == "push+pull") {
      modes.push_back(Mode::kPushPull);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--modes: '", std::string(m), "' is not push, pull or push+pull"));
    }
  }
  return modes;
}

void RunWorker(const ClientSetup& setup,
               const std::vector<std::string>& addresses,
               const std::vector<std::string>& backups, Mode mode,
               RunGate& gate, WorkerRun& run) {
  GrpcClientOptions options;
  options.backups = backups;
  GrpcParameterClient client(setup, addresses, options, JobSecurity());
  absl::StatusOr<uint64_t> clock = client.Register();
  std::vector<float> params(setup.layout->total);
  // Gradients go where a trainer computes them: into the client's buffer,
  // which a push sends in place.
  const float* filled = nullptr;
  auto gradients = [&] {
    absl::Span<float> g = client.GradientBuffer();
    if (g.data() != filled) {
      std::fill(g.begin(), g.end(), 1e-3f);
      filled = g.data();
    }
    return g;
  };
  // A push+pull (or, push_only, a push) of clock `c`: its version.
  auto step = [&](uint64_t c, bool push_only) {
    StepRequest request{c, gradients(), 0, absl::MakeSpan(params)};
    request.push_only = push_only;
    return StepVersion(client, std::move(request));
  };
  // One untimed operation warms connections and buffers.
  if (clock.ok()) {
    absl::StatusOr<uint64_t> v = step(*clock, false);
    if (v.ok()) ++*clock;
    if (!v.ok()) clock = v.status();
  }
  gate.Ready();
  if (!clock.ok()) {
    run.status = clock.status();
    return;
  }
  uint64_t c = *clock;
  while (!gate.Stopped() || run.latencies.size() < kMinOps) {
    const auto t = SteadyClock::now();
    absl::StatusOr<uint64_t> v;
    switch (mode) {
      case Mode::kPush:
        v = step(c, true);
        break;
      case Mode::kPull:
        v = client.Pull(c, absl::MakeSpan(params));
        break;
      case Mode::kPushPull:
        v = step(c, false);
        break;
    }
    if (!v.ok()) {
      run.status = v.status();
      return;
    }
    if (mode != Mode::kPull) ++c;
    run.latencies.push_back(Since(t));
  }
  client.Heartbeat(c, /*finished=*/true, absl::Seconds(5));
}

}  // namespace paramd
