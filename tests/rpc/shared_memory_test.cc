// Same-host steps through shared memory (worker.shared_memory, PushRequest.
// segment): 2 workers and 2 servers over loopback gRPC train the same job
// with the chunk bytes in shared memory and by the socket, under sync: the
// same parameters bit for bit, float32 and float16 both ways, and the
// servers' status says which bytes went which way, also with replies held
// back by the testing faults. (A server that cannot map the segments — on
// another host — is answered by the socket: cross_host_test.)
#include <catch2/catch.hpp>
#include <vector>

#include "proto/paramd.pb.h"
#include "tests/cluster_training.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

JobConfig Job() {
  testing::JobOptions o;
  o.epochs = 1;
  o.batch_size = 32;
  o.train_limit = 1024;  // 16 steps of each worker.
  o.test_limit = 256;
  return testing::MakeJob(o, testing::NewTempDir());
}

struct Run {
  std::vector<float> params;
  uint64_t shared_in = 0, shared_out = 0;
};

Run Train(JobConfig config, bool shared_memory) {
  config.worker.shared_memory = shared_memory;
  testing::LocalCluster cluster(config);
  testing::Observed observed;
  const auto trainers = testing::TrainAll(config, cluster, observed);
  Run run;
  run.params = trainers[0]->params();
  CHECK(trainers[1]->params() == run.params);
  for (int s = 0; s < 2; ++s) {
    proto::ShardStatus status;
    cluster.server(s).shard()->GetStatus(&status);
    run.shared_in += status.shared_memory_bytes_in();
    run.shared_out += status.shared_memory_bytes_out();
  }
  return run;
}

TEST_CASE("steps through shared memory equal steps by the socket",
          "[shm][integration]") {
  for (bool fp16 : {false, true}) {
    INFO((fp16 ? "float16 both ways" : "float32"));
    JobConfig config = Job();
    if (fp16) {
      config.compression.type = "fp16";
      config.compression.pull = "fp16";
    }
    const Run shared = Train(config, true);
    const Run socket = Train(config, false);
    CHECK(shared.params == socket.params);
    // 2 workers × 16 steps × the model's bytes, each way (the test pass
    // pulls by the socket).
    const uint64_t model_bytes =
        (784 * 64 + 64 + 64 * 10 + 10) * (fp16 ? 2 : 4);
    CHECK(shared.shared_in == 2 * 16 * model_bytes);
    CHECK(shared.shared_out >= 2 * 16 * model_bytes);
    CHECK(socket.shared_in == 0);
    CHECK(socket.shared_out == 0);
  }
}

TEST_CASE(
    "replies held back by the testing faults still answer in shared memory",
    "[shm][integration]") {
  JobConfig config = Job();
  config.testing.delay_reply_ms = 2;  // On the one serving path's alarm.
  const Run shared = Train(config, true);
  CHECK(shared.shared_in > 0);
  CHECK(shared.shared_out > 0);
  const Run socket = Train(config, false);
  CHECK(shared.params == socket.params);
}

}  // namespace
}  // namespace paramd
