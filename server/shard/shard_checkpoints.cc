#include "server/shard/shard_checkpoints.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {

// `s` with "shard K: " (and the file, when given) before its message.
absl::Status Named(int shard, const absl::Status& s,
                   const std::string& file = "") {
  return absl::Status(s.code(),
                      absl::StrCat("shard ", shard, ": ", file,
                                   file.empty() ? "" : ": ", s.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardCheckpoints>> ShardCheckpoints::Open(
    const JobConfig& config, int shard, uint64_t plan_fingerprint,
    FileSystem* file_system, bool fresh, Clock* clock, UpdatePolicy* policy,
    JobMetrics* metrics) {
  std::unique_ptr<ShardCheckpoints> checkpoints(new ShardCheckpoints(
      config, shard, plan_fingerprint,
      file_system != nullptr ? file_system : LocalFileSystem(), clock, policy,
      metrics));
  policy->CaptureEvery(static_cast<uint64_t>(config.checkpoint.every_steps));
  if (fresh) {
    absl::MutexLock write(&checkpoints->write_mu_);
    RETURN_IF_ERROR(checkpoints->checkpointer_.RemoveAll());
  } else {
    RETURN_IF_ERROR(checkpoints->Restore());
  }
  ShardCheckpoints* self = checkpoints.get();
  checkpoints->writer_ = std::thread([self] { self->WriteSubmitted(); });
  return checkpoints;
}

ShardCheckpoints::~ShardCheckpoints() {
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  if (writer_.joinable()) writer_.join();
}

void ShardCheckpoints::Submit(PolicyState state) {
  absl::MutexLock lock(&queue_mu_);
  if (submitted_.has_value()) {
    spdlog::warn(
        "shard {}: the checkpoint of version {} was not written yet when "
        "version {} was captured; writing {} only",
        shard_, submitted_->version, state.version, state.version);
  }
  submitted_ = std::move(state);
}

void ShardCheckpoints::Flush() {
  absl::MutexLock lock(&queue_mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
    return !submitted_.has_value() && !writing_;
  };
  queue_mu_.Await(absl::Condition(&idle));
}

void ShardCheckpoints::WriteSubmitted() {
  absl::MutexLock lock(&queue_mu_);
  auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) {
    return submitted_.has_value() || stopping_;
  };
  while (true) {
    queue_mu_.Await(absl::Condition(&work));
    // What was submitted before stopping is still written.
    if (!submitted_.has_value()) return;
    PolicyState state = std::move(*submitted_);
    submitted_.reset();
    writing_ = true;
    queue_mu_.Unlock();
    // A failure is logged; the next capture tries again.
    const uint64_t version = state.version;
    const double held_ms = absl::ToDoubleMilliseconds(state.held);
    if (absl::StatusOr<std::string> path = Write(std::move(state)); path.ok()) {
      spdlog::info(
          "shard {}: checkpoint of version {} written to {} (its capture "
          "held the shard {:.1f} ms)",
          shard_, version, *path, held_ms);
    }
    queue_mu_.Lock();
    writing_ = false;
  }
}

ShardCheckpoints::ShardCheckpoints(const JobConfig& config, int shard,
                                   uint64_t plan_fingerprint,
                                   FileSystem* file_system, Clock* clock,
                                   UpdatePolicy* policy, JobMetrics* metrics)
    : job_id_(config.job_id),
      shard_(shard),
      plan_fingerprint_(plan_fingerprint),
      clock_(clock),
      policy_(policy),
      metrics_(metrics),
      checkpointer_(file_system, config.checkpoint.dir, shard,
                    config.checkpoint.keep),
      full_every_(config.checkpoint.full_every) {}

absl::Status ShardCheckpoints::Restore() {
  absl::StatusOr<RestoredCheckpoint> restored;
  absl::StatusOr<std::optional<std::string>> reports;
  {
    absl::MutexLock write(&write_mu_);
    restored = checkpointer_.LoadNewest(job_id_, plan_fingerprint_);
    // The metrics file is newer than any checkpoint when it exists.
    reports = checkpointer_.LoadMetrics();
  }
  if (!restored.ok()) return Named(shard_, restored.status());
  for (const std::string& skipped : restored->skipped) {
    spdlog::warn("shard {}: checkpoint {} is damaged; using an older one",
                 shard_, skipped);
  }
  if (!reports.ok()) {
    spdlog::warn("shard {}: {}; epoch reports come from the checkpoint", shard_,
                 std::string(reports.status().message()));
  }
  const bool reports_file = reports.ok() && reports->has_value();
  if (!restored->state) {
    if (reports_file) RETURN_IF_ERROR(metrics_->RestoreState(**reports));
    return absl::OkStatus();
  }
  const CheckpointState& c = *restored->state;
  if (c.policy != policy_->name()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_, ": checkpoint ", restored->path,
                     " was written under policy ", c.policy,
                     "; the job's policy is ", policy_->name()));
  }
  PolicyState state;
  state.version = c.version;
  state.clocks = c.clocks;
  state.last_accepted = c.last_accepted;
  state.rows_applied = c.rows_applied;
  state.store_state = c.store_state;
  state.store_changes = c.store_changes;
  if (absl::Status s = policy_->Restore(state); !s.ok()) {
    return Named(shard_, s, restored->path);
  }
  if (absl::Status s =
          metrics_->RestoreState(reports_file ? **reports : c.metrics_state);
      !s.ok()) {
    return Named(shard_, s, restored->path);
  }
  restored_from_ = restored->path;
  {
    absl::MutexLock lock(&mu_);
    SetNewest(restored->path, c.version);
  }
  if (c.incremental) {
    spdlog::info("shard {}: restored version {} from {} on {}", shard_,
                 c.version, restored->path, restored->base_path);
  } else {
    spdlog::info("shard {}: restored version {} from {}", shard_, c.version,
                 restored->path);
  }
  return absl::OkStatus();
}

CheckpointState ShardCheckpoints::ToCheckpoint(PolicyState state) const {
  CheckpointState c;
  c.job_id = job_id_;
  c.plan_fingerprint = plan_fingerprint_;
  c.shard = shard_;
  c.policy = policy_->name();
  c.version = state.version;
  c.clocks = std::move(state.clocks);
  c.last_accepted = std::move(state.last_accepted);
  c.rows_applied = std::move(state.rows_applied);
  c.store_state = std::move(state.store_state);
  c.incremental = state.incremental;
  c.base_version = state.base_version;
  c.store_changes = std::move(state.store_changes);
  c.metrics_state = metrics_->SaveState();
  return c;
}

void ShardCheckpoints::SetNewest(const std::string& path, uint64_t version) {
  path_ = path;
  version_ = version;
  time_ = clock_->Now();
}

absl::StatusOr<std::string> ShardCheckpoints::Write(PolicyState state) {
  absl::MutexLock write(&write_mu_);
  {
    // A capture older than one already written adds nothing.
    absl::MutexLock lock(&mu_);
    if (!path_.empty() && state.version < version_) return path_;
  }
  const uint64_t version = state.version;
  if (!state.saved.ok()) {
    spdlog::error(
        "shard {}: the checkpoint of version {} was not taken: {} (the "
        "previous checkpoints are intact)",
        shard_, version, std::string(state.saved.message()));
    return state.saved;
  }
  const bool incremental = state.incremental;
  std::vector<int64_t> table_clocks = state.table_clocks;
  absl::StatusOr<std::string> path =
      checkpointer_.Save(ToCheckpoint(std::move(state)));
  if (!path.ok()) {
    spdlog::error("shard {}: {} (the previous checkpoints are intact)", shard_,
                  std::string(path.status().message()));
    return path.status();
  }
  ChooseNextCaptures(incremental, version, std::move(table_clocks));
  absl::MutexLock lock(&mu_);
  SetNewest(*path, version);
  return path;
}

void ShardCheckpoints::ChooseNextCaptures(bool incremental, uint64_t version,
                                          std::vector<int64_t> table_clocks) {
  if (full_every_ <= 1) return;
  if (!incremental) {
    deltas_since_full_ = 0;
    policy_->SetCaptureBase(
        UpdatePolicy::CaptureBase{version, std::move(table_clocks)});
  } else if (++deltas_since_full_ + 1 >= full_every_) {
    policy_->SetCaptureBase(std::nullopt);
  }
}

void ShardCheckpoints::SaveReports() {
  absl::MutexLock write(&write_mu_);
  if (absl::Status s = checkpointer_.SaveMetrics(metrics_->SaveState());
      !s.ok()) {
    spdlog::error("shard {}: epoch reports not saved: {}", shard_,
                  std::string(s.message()));
  }
}

void ShardCheckpoints::FillStatus(absl::Time now,
                                  proto::ShardStatus* status) const {
  status->set_restored_from(restored_from_);
  absl::MutexLock lock(&mu_);
  if (path_.empty()) return;
  status->set_checkpoint_path(path_);
  status->set_checkpoint_version(version_);
  status->set_checkpoint_age_seconds(absl::ToDoubleSeconds(now - time_));
}

}  // namespace paramd
