// Shard's checkpoints: opening checkpoint.dir (restore or a fresh start),
// writing one, and the status of the newest (server/checkpoint/checkpointer.h).
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "server/shard/shard.h"
#include "spdlog/spdlog.h"

namespace paramd {

absl::Status Shard::OpenCheckpoints(const ShardOptions& options) {
  checkpointer_ = std::make_unique<Checkpointer>(
      options.file_system != nullptr ? options.file_system : LocalFileSystem(),
      config_.checkpoint.dir, shard_id_, config_.checkpoint.keep);
  policy_->CaptureEvery(static_cast<uint64_t>(config_.checkpoint.every_steps));
  if (options.fresh) {
    RETURN_IF_ERROR(checkpointer_->RemoveAll());
    return absl::OkStatus();
  }
  absl::StatusOr<RestoredCheckpoint> restored =
      checkpointer_->LoadNewest(config_.job_id, plan_.fingerprint());
  if (!restored.ok()) {
    return absl::Status(
        restored.status().code(),
        absl::StrCat("shard ", shard_id_, ": ", restored.status().message()));
  }
  for (const std::string& skipped : restored->skipped) {
    spdlog::warn("shard {}: checkpoint {} is damaged; using an older one",
                 shard_id_, skipped);
  }
  // The metrics file is newer than any checkpoint when it exists.
  absl::StatusOr<std::optional<std::string>> metrics =
      checkpointer_->LoadMetrics();
  if (!metrics.ok()) {
    spdlog::warn("shard {}: {}; epoch reports come from the checkpoint",
                 shard_id_, std::string(metrics.status().message()));
  }
  const bool metrics_file = metrics.ok() && metrics->has_value();
  if (!restored->state) {
    if (metrics_file) RETURN_IF_ERROR(metrics_.RestoreState(**metrics));
    return absl::OkStatus();
  }
  const CheckpointState& c = *restored->state;
  if (c.policy != policy_->name()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_id_, ": checkpoint ", restored->path,
                     " was written under policy ", c.policy,
                     "; the job's policy is ", policy_->name()));
  }
  PolicyState state;
  state.version = c.version;
  state.clocks = c.clocks;
  state.last_accepted = c.last_accepted;
  state.store_state = c.store_state;
  if (absl::Status s = policy_->Restore(state); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("shard ", shard_id_, ": ", restored->path, ": ",
                               s.message()));
  }
  const std::string& reports = metrics_file ? **metrics : c.metrics_state;
  if (absl::Status s = metrics_.RestoreState(reports); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("shard ", shard_id_, ": ", restored->path, ": ",
                               s.message()));
  }
  restored_from_ = restored->path;
  {
    absl::MutexLock lock(&checkpoint_mu_);
    checkpoint_path_ = restored->path;
    checkpoint_version_ = c.version;
    checkpoint_time_ = clock_->Now();
  }
  spdlog::info("shard {}: restored version {} from {}", shard_id_, c.version,
               restored->path);
  return absl::OkStatus();
}

CheckpointState Shard::ToCheckpoint(const PolicyState& state) const {
  CheckpointState c;
  c.job_id = config_.job_id;
  c.plan_fingerprint = plan_.fingerprint();
  c.shard = shard_id_;
  c.policy = policy_->name();
  c.version = state.version;
  c.clocks = state.clocks;
  c.last_accepted = state.last_accepted;
  c.store_state = state.store_state;
  c.metrics_state = metrics_.SaveState();
  return c;
}

absl::StatusOr<std::string> Shard::WriteCheckpoint(const PolicyState& state) {
  absl::MutexLock lock(&checkpoint_mu_);
  // A capture older than one already written adds nothing.
  if (!checkpoint_path_.empty() && state.version < checkpoint_version_) {
    return checkpoint_path_;
  }
  absl::StatusOr<std::string> path = checkpointer_->Save(ToCheckpoint(state));
  if (!path.ok()) {
    spdlog::error("shard {}: {} (the previous checkpoints are intact)",
                  shard_id_, std::string(path.status().message()));
    return path.status();
  }
  checkpoint_path_ = *path;
  checkpoint_version_ = state.version;
  checkpoint_time_ = clock_->Now();
  return path;
}

absl::StatusOr<proto::CheckpointResponse> Shard::CheckpointNow() {
  if (checkpointer_ == nullptr) {
    return absl::FailedPreconditionError(
        "Checkpoint: the job has no checkpoint.dir");
  }
  const PolicyState state = policy_->Capture();
  ASSIGN_OR_RETURN(std::string path, WriteCheckpoint(state));
  proto::CheckpointResponse response;
  response.set_path(path);
  response.set_version(state.version);
  return response;
}

}  // namespace paramd
