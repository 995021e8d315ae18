// The job file's `worker` section: the compute device and BLAS settings, a
// framework's worker command, the overlapped exchange and same-host shared
// memory. Declared in common/config/job_sections.h, called by the job-file
// parser.

#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/job_sections.h"

namespace paramd {
namespace {

// worker.command: a list of strings, the program first.
absl::Status ParseCommand(YamlReader& r, const YAML::Node& node,
                          std::vector<std::string>* out) {
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  if (!node.IsSequence() || node.size() == 0) {
    return r.Error(node, "worker.command",
                   "expected a list: the program, then its arguments, "
                   "e.g. [\"/usr/bin/python3\", \"train.py\"]");
  }
  for (size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar() || (i == 0 && node[i].Scalar().empty())) {
      return r.Error(
          node[i], absl::StrCat("worker.command[", i, "]"),
          i == 0 ? "expected the program's path or name" : "expected a string");
    }
    out->push_back(node[i].Scalar());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseWorkerSection(YamlReader& r, const YAML::Node& w,
                                const JobConfig& job, WorkerConfig* out) {
  RETURN_IF_ERROR(ParseCommand(r, w["command"], &out->command));
  RETURN_IF_ERROR(r.Get(w, "worker", "device", false, &out->device));
  if (out->device != "auto" && out->device != "cpu" && out->device != "cuda") {
    return r.Error(w["device"], "worker.device",
                   absl::StrCat("unknown device '", out->device,
                                "' (expected: auto, cpu or cuda)"));
  }
  RETURN_IF_ERROR(r.Get(w, "worker", "allow_tf32", false, &out->allow_tf32));
  RETURN_IF_ERROR(r.Get(w, "worker", "threads", false, &out->threads));
  if (out->threads < 1 || out->threads > 256) {
    return r.Error(w["threads"], "worker.threads", "must be between 1 and 256");
  }
  RETURN_IF_ERROR(r.Get(w, "worker", "overlap", false, &out->overlap));
  std::string shared_memory = "auto";
  RETURN_IF_ERROR(r.Get(w, "worker", "shared_memory", false, &shared_memory));
  if (shared_memory != "auto" && shared_memory != "off") {
    return r.Error(w["shared_memory"], "worker.shared_memory",
                   absl::StrCat("unknown setting '", shared_memory,
                                "' (expected: auto or off)"));
  }
  out->shared_memory = shared_memory == "auto";
  RETURN_IF_ERROR(r.Get(w, "worker", "slice_bytes", false, &out->slice_bytes));
  // Up to a stream message's size (kStreamMessageBytes, 1 MiB).
  if (out->slice_bytes != 0 &&
      (out->slice_bytes < 4096 || out->slice_bytes > (1 << 20))) {
    return r.Error(w["slice_bytes"], "worker.slice_bytes",
                   "must be 0 (a push answered once whole) or between 4096 "
                   "and 1048576 bytes");
  }
  if (out->overlap && !job.model.embeddings.empty()) {
    return r.Error(w["overlap"], "worker.overlap",
                   "not with model.embeddings: a step's rows ride in its "
                   "first push message, before the gradient exists");
  }
  if (out->overlap && job.policy.backup_workers > 0) {
    return r.Error(w["overlap"], "worker.overlap",
                   "does not work with policy.backup_workers yet (a "
                   "worker skipping ahead past a round closed without it "
                   "has its next exchange in flight)");
  }
  if (out->overlap && job.compression.topk()) {
    return r.Error(w["overlap"], "worker.overlap",
                   "not with compression topk: it selects over the whole "
                   "gradient at once");
  }
  RETURN_IF_ERROR(r.Get(w, "worker", "blas_core", false, &out->blas_core));
  for (char ch : out->blas_core) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) {
      return r.Error(w["blas_core"], "worker.blas_core",
                     "expected auto, library or an OpenBLAS core name "
                     "such as Haswell");
    }
  }
  return absl::OkStatus();
}

}  // namespace paramd
