#include "server/declare/model_declaration.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/job_file.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "server/checkpoint/file_system.h"
#include "server/shard/request_checks.h"

namespace paramd {
namespace {

// `s` with "DeclareModel: shard K: rank R: " before its message.
absl::Status Named(const absl::Status& s, int shard_id, uint32_t rank) {
  return absl::Status(
      s.code(), absl::StrCat("DeclareModel: shard ", shard_id, ": rank ", rank,
                             ": ", s.message()));
}

}  // namespace

absl::StatusOr<JobConfig> CheckDeclaration(
    const JobConfig& job, int shard_id, const std::string& launch,
    const proto::DeclareModelRequest& request,
    proto::DeclareModelResponse* response) {
  const uint32_t rank = request.rank();
  if (request.job_id() != job.job_id) {
    return Named(absl::InvalidArgumentError(absl::StrCat(
                     "job_id '", QuoteClientBytes(request.job_id()),
                     "' is not this shard's job '", job.job_id, "'")),
                 shard_id, rank);
  }
  if (rank >= static_cast<uint32_t>(job.num_workers)) {
    return Named(absl::InvalidArgumentError(
                     absl::StrCat("rank is outside [0, ", job.num_workers,
                                  ") for the job's cluster.workers")),
                 shard_id, rank);
  }
  if (request.launch() != launch) {
    return Named(absl::FailedPreconditionError(absl::StrCat(
                     "belongs to launch '", QuoteClientBytes(request.launch()),
                     "' but this shard serves launch '", launch, "'")),
                 shard_id, rank);
  }
  absl::StatusOr<JobConfig> declared =
      WithDeclaredModel(job, request.declaration());
  if (!declared.ok()) {
    const absl::Status s = declared.status();
    // A declaration that does not parse or fit is the caller's fault.
    return Named(absl::IsFailedPrecondition(s)
                     ? s
                     : absl::InvalidArgumentError(s.message()),
                 shard_id, rank);
  }
  if (!job.awaits_declaration()) {
    if (absl::Status s = SameDeclaredModel(job, *declared); !s.ok()) {
      return Named(absl::FailedPreconditionError(absl::StrCat(
                       s.message(),
                       " (the model this shard serves; restart the job's "
                       "servers with --fresh to declare another)")),
                   shard_id, rank);
    }
  }
  absl::StatusOr<PartitionPlan> plan =
      PartitionPlan::Build(BuildModelSpec(declared->model),
                           declared->chunk_bytes, declared->num_shards());
  if (!plan.ok()) {
    return Named(absl::InvalidArgumentError(plan.status().message()), shard_id,
                 rank);
  }
  response->set_plan_fingerprint(plan->fingerprint());
  return declared;
}

std::string DeclarationPath(const JobConfig& job, int shard_id) {
  if (job.checkpoint.dir.empty()) return "";
  return absl::StrCat(job.checkpoint.dir, "/shard-", shard_id,
                      "-declared-model.yaml");
}

absl::Status KeepDeclaration(const JobConfig& job, int shard_id) {
  const std::string path = DeclarationPath(job, shard_id);
  if (path.empty()) return absl::OkStatus();
  FileSystem* fs = LocalFileSystem();
  RETURN_IF_ERROR(fs->MakeDirs(job.checkpoint.dir));
  const std::string tmp = path + ".tmp";
  RETURN_IF_ERROR(fs->WriteFileSynced(tmp, job.declaration));
  RETURN_IF_ERROR(fs->Rename(tmp, path));
  return fs->SyncDir(job.checkpoint.dir);
}

absl::StatusOr<std::optional<JobConfig>> KeptDeclaration(const JobConfig& job,
                                                         int shard_id) {
  const std::string path = DeclarationPath(job, shard_id);
  if (path.empty()) return std::nullopt;
  absl::StatusOr<std::string> text = LocalFileSystem()->ReadFile(path);
  if (absl::IsNotFound(text.status())) return std::nullopt;
  if (!text.ok()) return text.status();
  absl::StatusOr<JobConfig> declared = WithDeclaredModel(job, *text);
  if (!declared.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": the model this shard took no longer fits ", job.path, ": ",
        declared.status().message(), " (start it with --fresh to forget it)"));
  }
  return declared;
}

}  // namespace paramd
