#include "tools/bench/bench_optimizers.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "common/base/status_macros.h"
#include "common/config/job_config.h"
#include "common/model/partitioner.h"
#include "server/optimizer/optimizer.h"
#include "tools/bench/bench_timing.h"
#include "tools/bench/bench_util.h"

namespace paramd {
namespace {

struct OptimizerCase {
  const char* name;
  OptimizerConfig config;
};

std::vector<OptimizerCase> OptimizerCases() {
  auto make = [](const char* type, double momentum, bool nesterov) {
    OptimizerConfig c;
    c.type = type;
    c.learning_rate = 1e-3;
    c.momentum = momentum;
    c.nesterov = nesterov;
    c.eps = std::string(type) == "adagrad" ? 1e-10 : 1e-8;
    return c;
  };
  return {
      {"sgd", make("sgd", 0, false)},
      {"sgd momentum", make("sgd", 0.9, false)},
      {"sgd nesterov", make("sgd", 0.9, true)},
      {"adam", make("adam", 0, false)},
      {"adamw", make("adamw", 0, false)},
      {"rmsprop", make("rmsprop", 0, false)},
      {"adagrad", make("adagrad", 0, false)},
  };
}

// Bytes an optimizer step must move per parameter: read and write the
// parameter and each slot, read the gradient.
int64_t BytesTouchedPerParam(int slots) {
  return kElementBytes * (2 + 1 + 2 * slots);
}

}  // namespace

absl::Status RunOptimizerSection(
    const std::vector<int64_t>& sizes, double bandwidth,
    std::vector<std::pair<std::string, double>>* at_16m) {
  std::printf(
      "Optimizer apply, one thread (bound: bytes touched / %.2f GB/s "
      "of memory traffic, the faster of memcpy and axpy)\n",
      bandwidth / 1e9);
  std::printf("  %-14s %6s %8s %10s %10s %9s %8s\n", "optimizer", "params",
              "B/param", "ms/step", "Mparam/s", "GB/s", "of bound");
  int64_t most = 0;
  for (int64_t n : sizes) most = std::max(most, n);
  std::vector<float> params(most, 0.01f), grad(most, 1e-3f);
  std::vector<std::vector<float>> slots;
  for (const OptimizerCase& c : OptimizerCases()) {
    ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt, MakeOptimizer(c.config));
    for (int64_t n : sizes) {
      slots.assign(opt->num_slots(), std::vector<float>(n, 0.0f));
      int64_t step = 0;
      const double t = SecondsPerCall(0.4, [&] {
        opt->Apply(absl::MakeSpan(params.data(), n),
                   absl::MakeConstSpan(grad.data(), n), 1.0f,
                   absl::MakeSpan(slots), ++step);
        return true;
      });
      const int64_t per = BytesTouchedPerParam(opt->num_slots());
      const double gbps = static_cast<double>(per * n) / t;
      const double of_bound = gbps / bandwidth;
      std::printf("  %-14s %6s %8lld %10.2f %10.1f %9.2f %7.1f%%\n", c.name,
                  SizeName(n).c_str(), static_cast<long long>(per), t * 1e3,
                  static_cast<double>(n) / t / 1e6, gbps / 1e9, 100 * of_bound);
      std::fflush(stdout);
      if (n == (16 << 20)) at_16m->emplace_back(c.name, of_bound);
    }
  }
  std::printf("\n");
  return absl::OkStatus();
}

}  // namespace paramd
