// Steps of one worker over real gRPC against a cluster in the test's
// process, with deterministic gradients: what tests of the client's calls
// compare (the same steps taken two ways end bit-identical).
#ifndef PARAMD_TESTS_GRPC_STEPS_H_
#define PARAMD_TESTS_GRPC_STEPS_H_

#include <vector>

#include "common/config/job_config.h"

namespace paramd::testing {

// Rank 0 registers with a LocalCluster of `config`, pulls, and takes
// `steps` steps, each a push+pull on the StepStream or (`apart`) a push
// without a pull followed by a pull; every step's gradient is a function
// of the parameters and the clock. Returns the parameters after.
std::vector<float> StepsOverGrpc(const JobConfig& config, int steps,
                                 bool apart = false);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_GRPC_STEPS_H_
