// FrameworkWorker: one rank of a model.type tensors job, driven by a
// framework's training loop (python/paramd: PyTorch) instead of paramd's
// Trainer. It speaks to every shard through the same ParameterClient the
// C++ worker uses (GrpcParameterClient: retries, StepStream, fp16, TLS and
// the job token), keeps the rank's clock, sends its heartbeats from a
// thread of its own (worker/heartbeats.h) and registers again when a
// shard dropped the rank.
//
// Parameters and gradients are flat float32 buffers in the job's tensor
// order (FlatLayout); the caller's tensors are views into them, so nothing
// is copied between the framework and the wire. The step timeline records
// what it sees of a step: the framework's compute between two steps, then
// the push+pull and each shard's call.
//
// Thread-compatible: one training loop calls it at a time.
#ifndef PARAMD_PYTHON_NATIVE_FRAMEWORK_WORKER_H_
#define PARAMD_PYTHON_NATIVE_FRAMEWORK_WORKER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/base/epoch_report.h"
#include "common/config/job_config.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "worker/heartbeats.h"
#include "worker/parameter_client.h"
#include "worker/worker_timeline.h"

namespace paramd {

struct FrameworkWorkerOptions {
  std::string job;  // The job file.
  int rank = 0;
  // Overrides cluster.servers ("host:port" per shard); empty: the job's
  // (or, with cluster.servers: {slurm: N}, the Slurm job's).
  std::vector<std::string> servers;
  std::string launch;  // RegisterRequest.launch (paramctl run's --launch).
  // Overrides replication.backups (one per shard; empty: the job's): with
  // replication.factor 2, where a shard's calls go when its primary does
  // not serve.
  std::vector<std::string> backups;
};

// A tensor as the framework names it: name, shape, and whether it is a
// statistic (a module's buffer: model.tensors[i].kind statistic).
struct DeclaredTensor {
  std::string name;
  std::vector<int64_t> shape;
  bool statistic = false;
};

class FrameworkWorker {
 public:
  // Loads the job (model.type tensors only) and, unless the job leaves the
  // model to its workers (JobConfig::awaits_declaration: then Declare
  // does), makes the client; does not contact the servers yet.
  static absl::StatusOr<std::unique_ptr<FrameworkWorker>> Create(
      const FrameworkWorkerOptions& options);
  // As Create, with the client `make_client` makes (tests).
  static absl::StatusOr<std::unique_ptr<FrameworkWorker>> Create(
      const FrameworkWorkerOptions& options,
      const ParameterClientFactory& make_client);
  ~FrameworkWorker();

  const JobConfig& config() const { return config_; }
  const ModelSpec& spec() const { return spec_; }
  const FlatLayout& layout() const { return layout_; }
  int rank() const { return rank_; }

  // The framework's model against the job's tensors, in order: an error
  // names the first tensor that differs (name, shape, kind, one missing or
  // extra) and the job file.
  absl::Status CheckTensors(const std::vector<DeclaredTensor>& tensors) const;

  // For a job that leaves the model to its workers: the model's tensors
  // and (when the job file has no optimizer section) optimizer, as YAML
  // (WithDeclaredModel in common/config/job_file.h). Makes the spec, the
  // layout and the client; every registration from then on declares it
  // to the shards first (DeclareModel), which take it or compare it with
  // the one they took. An error names the declaration's line and field.
  absl::Status Declare(const std::string& declaration);

  // Registers with every shard and pulls the parameters at the clock
  // joined into `params` (layout().total floats); starts heartbeats.
  // Returns that clock.
  absl::StatusOr<uint64_t> Start(absl::Span<float> params);

  // Registers and sends `params` (layout().total floats, rank 0's model)
  // as the servers' initial values (model.initial_values: rank0); every
  // rank's Start then pulls them. Rank 0 only; a server that has them
  // already (a restarted rank 0) keeps its own.
  absl::Status SendInitialValues(absl::Span<const float> params);

  // One step: pushes `grads` (computed at clock()) with the batch's mean
  // `loss`, and pulls the parameters of the next clock into `params`.
  // If a shard dropped the rank (its lease expired, or it restarted), the
  // gradient is not applied: the rank registers again and `params` gets
  // the parameters at the clock joined. Returns the clock now.
  absl::StatusOr<uint64_t> Step(absl::Span<const float> grads, float loss,
                                absl::Span<float> params);

  // Fills `out` (dim floats per id) with rows `ids` (sorted, distinct) of
  // embedding table `table` (model.embeddings) as of clock(), each from
  // the shard that owns it.
  absl::Status PullRows(uint32_t table, absl::Span<const uint64_t> ids,
                        absl::Span<float> out);
  // The row gradients of `table` that every Step from now on pushes with
  // the dense ones (dim floats per id; ids sorted and distinct), until
  // replaced (no ids: none).
  absl::Status SetRowGradients(uint32_t table, absl::Span<const uint64_t> ids,
                               absl::Span<const float> grads);

  // Sends one finished epoch's figures to shard 0 (paramctl status and
  // the run's summary show them).
  absl::Status ReportEpoch(const EpochReport& report);

  // Tells every shard this rank is done and stops heartbeats. Later calls
  // do nothing.
  void Finish();

  uint64_t clock() const;

 private:
  FrameworkWorker(JobConfig config, int rank,
                  ParameterClientFactory make_client);
  // The plan, the timeline, the client and heartbeats, for spec_.
  absl::Status Build();
  // FailedPrecondition naming `what` before the model is declared.
  absl::Status Ready(const char* what) const;
  // Declares the model (when the worker declared one), then registers.
  absl::StatusOr<uint64_t> Register();
  absl::StatusOr<uint64_t> Join(absl::Span<float> params);
  // `table`, `ids` (sorted, distinct, below the table's rows) and `values`
  // floats (dim per id), or InvalidArgument naming `what` and the fault.
  absl::Status CheckRows(const char* what, uint32_t table,
                         absl::Span<const uint64_t> ids, size_t values) const;
  // InvalidArgument naming `what` unless `floats` is the job's flat size.
  absl::Status CheckFlat(const char* what, size_t floats) const;
  // A traced step's events: `compute` (the framework's work since the last
  // step), push+pull from `push_begin`, the step, and its shard calls.
  void AddStep(uint64_t clock, absl::Time push_begin, uint64_t version,
               size_t floats);

  // The job file's; with the declared model once Declare took it.
  JobConfig config_;
  const int rank_;
  const ParameterClientFactory make_client_;
  ModelSpec spec_;
  FlatLayout layout_;
  std::unique_ptr<PartitionPlan> plan_;
  std::unique_ptr<ParameterClient> client_;
  // Holds the rank's clock (read by the heartbeat thread); started by
  // Start, stopped before client_ goes.
  std::unique_ptr<Heartbeats> heartbeats_;
  // The step timeline (tracing, or paramctl trace on a running job): each
  // traced step's push+pull and shard calls, and the framework's compute
  // between steps.
  std::unique_ptr<WorkerTimeline> trace_;
  std::vector<ShardCallTimes> call_times_;
  // Each table's row gradients (SetRowGradients), pushed with every Step
  // until replaced; a table without ids pushes none.
  std::vector<std::vector<uint64_t>> row_ids_;
  std::vector<std::vector<float>> row_grads_;
  absl::Time last_step_end_ = absl::InfinitePast();  // When traced.
};

}  // namespace paramd

#endif  // PARAMD_PYTHON_NATIVE_FRAMEWORK_WORKER_H_
