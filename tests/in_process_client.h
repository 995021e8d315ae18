// An in-process cluster for unit tests of the worker: every shard of a job
// as a Shard object, and ParameterClients that call them directly — the
// same requests the gRPC client sends, without sockets.
#ifndef PARAMD_TESTS_IN_PROCESS_CLIENT_H_
#define PARAMD_TESTS_IN_PROCESS_CLIENT_H_

#include <atomic>
#include <memory>
#include <vector>

#include "common/config/job_config.h"
#include "server/shard/shard.h"
#include "worker/parameter_client.h"

namespace paramd::testing {

class InProcessCluster {
 public:
  // Fails the test when a shard cannot be built.
  explicit InProcessCluster(const JobConfig& config);
  ~InProcessCluster();

  Shard& shard(int k) { return *shards_[k]; }
  int num_shards() const { return static_cast<int>(shards_.size()); }

  // Makes clients of this cluster, which must outlive them.
  ParameterClientFactory ClientFactory();

  // What every client of this cluster did.
  struct Calls {
    std::atomic<int> registrations{0};  // Completed Register calls.
    std::atomic<int> pushes{0};         // Pushes every shard accepted.
    std::atomic<int> aborted{0};        // Pushes a shard answered Aborted.
    std::atomic<int> epoch_reports{0};
    std::atomic<int> row_pulls{0};  // Completed PullRows calls.
    // Work run while a step waited (StepRequest::while_waiting).
    std::atomic<int> while_waiting{0};
  };
  const Calls& calls() const { return calls_; }
  // Whether clients made from now on run a step's while_waiting work
  // (between its push and its pull, as the gRPC client does) or drop it
  // (as a client that cannot). Default: run it.
  void set_run_while_waiting(bool run) { run_while_waiting_ = run; }

 private:
  std::vector<std::unique_ptr<Shard>> shards_;
  Calls calls_;
  bool run_while_waiting_ = true;
};

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_IN_PROCESS_CLIENT_H_
