// One paramd-bench worker: a GrpcParameterClient that registers, warms up
// with one untimed push+pull, and then runs push, pull or push+pull over
// and over while a RunGate says the timed part goes on, noting each
// operation's latency. paramd-bench runs its workers as threads of its own
// process (bench_transport.h) or, on other hosts, as processes of their
// own (worker_processes.h); the gate is what differs.
#ifndef PARAMD_TOOLS_BENCH_BENCH_WORKER_H_
#define PARAMD_TOOLS_BENCH_BENCH_WORKER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/parameter_client.h"

namespace paramd {

enum class Mode { kPush, kPull, kPushPull };

const char* ModeName(Mode m);

// "push,pull,push+pull" (any of them, in any order).
absl::StatusOr<std::vector<Mode>> ParseModes(const std::string& text);

// When a worker's timed part begins and ends.
class RunGate {
 public:
  virtual ~RunGate() = default;
  // The worker warmed up (or failed to): returns once the timed part
  // begins.
  virtual void Ready() = 0;
  // Whether the timed part is over.
  virtual bool Stopped() = 0;
};

// A worker keeps going past its gate until it did this many operations.
constexpr size_t kMinOps = 5;

struct WorkerRun {
  absl::Status status;
  std::vector<double> latencies;  // Seconds, one per timed operation.
};

// Runs rank `setup.rank` of the job against the shards at `addresses`
// (their backups at `backups`, empty: none) in `mode`, timed by `gate`.
void RunWorker(const ClientSetup& setup,
               const std::vector<std::string>& addresses,
               const std::vector<std::string>& backups, Mode mode,
               RunGate& gate, WorkerRun& run);

}  // namespace paramd

#endif  // PARAMD_TOOLS_BENCH_BENCH_WORKER_H_
