// MakeModel: the compute backend a job asks for (worker.device).
#ifndef PARAMD_WORKER_MODEL_MODEL_FACTORY_H_
#define PARAMD_WORKER_MODEL_MODEL_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"
#include "worker/model/model.h"

namespace paramd {

// InvalidArgument, naming the job file and what trains it instead, for a
// model.type paramd-worker does not train (tensors: a framework's worker).
absl::Status CheckWorkerModelType(const JobConfig& config);

// The model for `config` on the device the job asks for (worker.device):
// "cpu"; "cuda" (an error naming the reason when no device can be used);
// "auto", CUDA when a device can be used and otherwise the CPU, logging one
// line that says which and why. `max_batch` sizes the scratch buffers:
// larger training batches are refused, larger evaluations split.
absl::StatusOr<std::unique_ptr<Model>> MakeModel(const JobConfig& config,
                                                 int max_batch);

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_MODEL_FACTORY_H_
