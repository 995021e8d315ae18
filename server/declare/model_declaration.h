// A shard's side of DeclareModel (proto/paramd.proto): a framework job's
// workers declare their model, and a shard whose job file leaves it to
// them takes the first valid declaration, keeps it beside its checkpoints,
// and compares every later one with it.
#ifndef PARAMD_SERVER_DECLARE_MODEL_DECLARATION_H_
#define PARAMD_SERVER_DECLARE_MODEL_DECLARATION_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"
#include "proto/paramd.pb.h"

namespace paramd {

// Checks `request` for shard `shard_id` of `job` (the job file's config,
// or one that took a declaration already) serving launch `launch`: the
// job id and launch, the declaration itself (WithDeclaredModel), and, when
// `job` took one or needs none, that it declares the same model
// (SameDeclaredModel). Fills `response` and returns the config the
// declaration makes. Errors name "DeclareModel", the shard and the rank.
absl::StatusOr<JobConfig> CheckDeclaration(
    const JobConfig& job, int shard_id, const std::string& launch,
    const proto::DeclareModelRequest& request,
    proto::DeclareModelResponse* response);

// Where shard `shard_id` keeps the declaration it took: beside its
// checkpoints in checkpoint.dir; empty without one.
std::string DeclarationPath(const JobConfig& job, int shard_id);

// Writes `job`'s declaration to DeclarationPath (atomically: a temporary
// file renamed). Nothing to do without checkpoint.dir.
absl::Status KeepDeclaration(const JobConfig& job, int shard_id);

// The declaration shard `shard_id` kept, taken again (a restart): nullopt
// when there is none (or no checkpoint.dir); an error names the file when
// it cannot be read or no longer fits the job file.
absl::StatusOr<std::optional<JobConfig>> KeptDeclaration(const JobConfig& job,
                                                         int shard_id);

}  // namespace paramd

#endif  // PARAMD_SERVER_DECLARE_MODEL_DECLARATION_H_
