// The job file's sections, each read into its part of the JobConfig by a
// file of its own (cluster_section.cc, model_section.cc, ...), all called
// by the job-file parser (common/config/job_file.h). Unless a parser says
// otherwise, the parser checked the section's keys before calling it. Each
// reads the mapping it is given (the section; empty when absent) with
// errors naming file, line and field.
#ifndef PARAMD_COMMON_CONFIG_JOB_SECTIONS_H_
#define PARAMD_COMMON_CONFIG_JOB_SECTIONS_H_

#include <yaml-cpp/yaml.h>

#include <functional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "common/config/job_config.h"
#include "common/config/yaml_reader.h"

namespace paramd {

// A path as written in the job file → the path to use (relative ones
// resolve against the job file's folder).
using PathResolver = std::function<std::string(const std::string&)>;

// --- `cluster` (cluster_section.cc): the servers (a list of "host:port"
// addresses, or {slurm: N, port: P} for servers placed by Slurm) and the
// number of workers, into servers, servers_from_slurm, slurm_port and
// num_workers.
absl::Status ParseClusterSection(YamlReader& reader, const YAML::Node& cluster,
                                 JobConfig* job);

// --- `model` (model_section.cc): the MLP's layers and, for embedding_bag
// models, the embedding tables and how samples become row ids. Its keys
// are not checked before. `resolve` resolves model.tensors_file.

// The largest `rows` a table may declare (ids are hashed into [0, rows)).
constexpr uint64_t kMaxTableRows = uint64_t{1} << 40;

absl::Status ParseModelSection(YamlReader& reader, const YAML::Node& model,
                               const PathResolver& resolve, ModelConfig* out);

// --- model.layers and model.input as a typed layer graph
// (layers_section.cc; docs/job-file.md, "Layers"), parsed and
// shape-checked.

// Whether `layers` (model.layers) is the typed form: a list in which some
// element is not an integer width.
bool IsTypedLayerList(const YAML::Node& layers);
// Parses the typed model.layers into out->graph, each layer's fields
// checked; shapes are not inferred yet (a sparse front needs the tables).
absl::Status ParseLayerList(YamlReader& reader, const YAML::Node& model,
                            ModelConfig* out);
// Whether a layer kind is a sparse front (embedding_bag, embedding_concat).
bool IsSparseLayer(LayerKind kind);
// Parses model.input (not given when model.layers[0] is a sparse front)
// and, unless ParseLayerList did, the typed model.layers into out->input
// and out->graph, then infers every shape (model.embeddings already
// parsed); a refusal names the layer's index, its field and the shapes
// involved, at the line of the field.
absl::Status ParseLayerGraph(YamlReader& reader, const YAML::Node& model,
                             ModelConfig* out);

// --- The tensors of a model.type tensors job (tensors_section.cc;
// docs/job-file.md, "Framework models"): model.tensors inline, or
// model.tensors_file, a YAML file of its own with one key `tensors`
// (python/paramd writes it from a model).

// The most elements one model's tensors may hold together (2^31 − 1: the
// flat buffers are indexed by int64, the wire's chunk lengths by uint32).
constexpr int64_t kMaxTensorElements = (int64_t{1} << 31) - 1;

// Parses exactly one of model.tensors and model.tensors_file (resolved by
// `resolve`) into out->tensors. A refusal names the field (in the
// tensors file, with that file's line) and the tensor.
absl::Status ParseTensorsSection(YamlReader& reader, const YAML::Node& model,
                                 const PathResolver& resolve, ModelConfig* out);
// Parses `list` (a non-empty list of tensors, named `field` in errors)
// into out->tensors: a tensors file's list, or a declaration's.
absl::Status ParseTensorList(YamlReader& reader, const YAML::Node& list,
                             const std::string& field, ModelConfig* out);

// --- `optimizer` with its `schedule` (optimizer_section.cc).

// The keys the `optimizer` section may hold, across every type.
const std::set<std::string>& OptimizerSectionKeys();
// Reads `node` (its keys checked against OptimizerSectionKeys) into `out`:
// the keys the chosen type takes, their ranges, and the schedule.
absl::Status ParseOptimizerSection(YamlReader& reader, const YAML::Node& node,
                                   OptimizerConfig* out);
// The `schedule` mapping of `optimizer` (absent: constant), named `field`
// in errors (e.g. "optimizer.schedule").
absl::Status ParseScheduleSection(YamlReader& reader,
                                  const YAML::Node& optimizer,
                                  const std::string& field,
                                  double learning_rate, ScheduleConfig* out);

// --- `policy` and `guard` (policy_section.cc): how the servers take
// pushes.

// The keys the `policy` section may hold, across every type.
const std::set<std::string>& PolicySectionKeys();
// Reads `node` (its keys checked against PolicySectionKeys) into `out`:
// the type, and the keys that type takes (a key of another type is
// refused, naming the types it applies to). `job` has its cluster and
// model read already.
absl::Status ParsePolicySection(YamlReader& reader, const YAML::Node& node,
                                const JobConfig& job, PolicyConfig* out);
// Each table's policy (model.embeddings[i].policy, node `tables`) against
// the job's `policy`: a table may be async, or name the job's policy.
absl::Status CheckTablePolicies(YamlReader& reader, const YAML::Node& tables,
                                const PolicyConfig& policy,
                                const ModelConfig& model);
// Reads the `guard` mapping `node` (its keys checked against
// GuardSectionKeys), which turns the guard on; absent or null: it stays
// off.
const std::set<std::string>& GuardSectionKeys();
absl::Status ParseGuardSection(YamlReader& reader, const YAML::Node& node,
                               GuardConfig* out);

// --- `data` (data_section.cc): the data files' format (IDX images, or
// click logs), where the training and test files are, how many samples
// to use, and the training batches' augmentation.

// Where the data files are when the job file names no data.dir: Debian's
// dataset-fashion-mnist.
inline constexpr char kDefaultDataDir[] = "/usr/share/datasets/fashion-mnist";
// The largest data.augment.crop_padding (pixels on each side).
inline constexpr int kMaxCropPadding = 16;

// With `check_readable`, every file it names must be readable. `resolve`
// resolves data.dir.
absl::Status ParseDataSection(YamlReader& reader, const YAML::Node& data,
                              const PathResolver& resolve, bool check_readable,
                              DataConfig* out);

// --- `worker` (worker_section.cc): the compute device and BLAS settings,
// a framework's worker command, the overlapped exchange, slices and
// same-host shared memory. `job` has its model, policy and compression
// read already: worker.overlap is refused with embeddings, backup workers
// and top-k.
absl::Status ParseWorkerSection(YamlReader& reader, const YAML::Node& worker,
                                const JobConfig& job, WorkerConfig* out);

// --- The sections about running a job rather than training it
// (run_sections.cc).
absl::Status ParseLimitsSection(YamlReader& reader, const YAML::Node& node,
                                LimitsConfig* out);
absl::Status ParseSecuritySection(YamlReader& reader, const YAML::Node& node,
                                  const PathResolver& resolve,
                                  SecurityConfig* out);
absl::Status ParseCheckpointSection(YamlReader& reader, const YAML::Node& node,
                                    const PathResolver& resolve,
                                    CheckpointConfig* out);
// `job` has its cluster read already (backups are checked against its
// servers).
absl::Status ParseReplicationSection(YamlReader& reader, const YAML::Node& node,
                                     const JobConfig& job,
                                     ReplicationConfig* out);
absl::Status ParseRestartSection(YamlReader& reader, const YAML::Node& node,
                                 RestartConfig* out);
absl::Status ParseCoordinationSection(YamlReader& reader,
                                      const YAML::Node& node,
                                      const PathResolver& resolve,
                                      CoordinationConfig* out);
// `num_workers` bounds testing.slow_rank.
absl::Status ParseTestingSection(YamlReader& reader, const YAML::Node& node,
                                 int num_workers, TestingConfig* out);
absl::Status ParseCompressionSection(YamlReader& reader, const YAML::Node& node,
                                     CompressionConfig* out);
absl::Status ParseTracingSection(YamlReader& reader, const YAML::Node& node,
                                 const PathResolver& resolve,
                                 TracingConfig* out);
absl::Status ParseMetricsSection(YamlReader& reader, const YAML::Node& node,
                                 MetricsConfig* out);

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_JOB_SECTIONS_H_
