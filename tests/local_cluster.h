// A local cluster for tests: every shard of a job served over gRPC in
// this process, on loopback ports chosen by the OS.
#ifndef PARAMD_TESTS_LOCAL_CLUSTER_H_
#define PARAMD_TESTS_LOCAL_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "common/base/clock.h"
#include "common/config/job_config.h"
#include "common/model/partitioner.h"
#include "proto/paramd.grpc.pb.h"
#include "server/rpc/parameter_server.h"

namespace paramd::testing {

// Every shard of `config` served in this process on 127.0.0.1:0.
class LocalCluster {
 public:
  // `clock` as for Shard::Create.
  explicit LocalCluster(const JobConfig& config, Clock* clock = nullptr);
  ~LocalCluster();
  std::vector<std::string> addresses() const { return addresses_; }
  ParameterServer& server(int shard) { return *servers_[shard]; }

 private:
  std::vector<std::unique_ptr<ParameterServer>> servers_;
  std::vector<std::string> addresses_;
};

// Registers `rank` (both phases, at clock 0) through a protobuf stub,
// failing the test on error.
void RegisterOverGrpc(proto::ParameterService::Stub& stub,
                      const JobConfig& config, const PartitionPlan& plan,
                      uint32_t rank);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_LOCAL_CLUSTER_H_
