#include "tools/ctl/run_folder.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

constexpr char kPrefix[] = "paramd-run-";
constexpr char kPidFile[] = "paramctl.pid";

}  // namespace

int SweepStaleRunFolders(const std::string& parent) {
  std::error_code error;
  std::vector<std::filesystem::path> stale;
  for (const auto& entry : std::filesystem::directory_iterator(parent, error)) {
    if (!absl::StartsWith(entry.path().filename().string(), kPrefix) ||
        !entry.is_directory(error)) {
      continue;
    }
    std::ifstream in(entry.path() / kPidFile);
    long pid = 0;
    if (!(in >> pid) || pid <= 0) continue;
    // Gone, not merely someone else's (EPERM).
    if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      stale.push_back(entry.path());
    }
  }
  int removed = 0;
  for (const auto& path : stale) {
    if (std::filesystem::remove_all(path, error) > 0 && !error) ++removed;
  }
  return removed;
}

absl::StatusOr<std::unique_ptr<RunFolder>> RunFolder::Create(
    const std::string& parent) {
  const int swept = SweepStaleRunFolders(parent);
  std::string pattern = absl::StrCat(parent, "/", kPrefix, "XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a run folder in ", parent));
  }
  std::unique_ptr<RunFolder> folder(new RunFolder(pattern, swept));
  std::ofstream out(absl::StrCat(folder->path_, "/", kPidFile));
  out << getpid() << "\n";
  if (!out.flush()) {
    return absl::InternalError(
        absl::StrCat("cannot write ", folder->path_, "/", kPidFile));
  }
  return folder;
}

RunFolder::~RunFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string RunFolder::PortFile(int shard) const {
  return absl::StrCat(path_, "/shard-", shard, ".port");
}

std::string RunFolder::CheckpointDir() const {
  return absl::StrCat(path_, "/checkpoints");
}

int RunFolder::ReadPort(int shard) const {
  std::ifstream in(PortFile(shard));
  int port = 0;
  return in >> port && port > 0 ? port : 0;
}

absl::Status CheckCheckpointDir(const JobConfig& config, bool resume,
                                bool fresh) {
  if (resume && fresh) {
    return absl::InvalidArgumentError(
        "--resume and --fresh exclude each other");
  }
  if (config.checkpoint.dir.empty()) {
    if (resume || fresh) {
      return absl::FailedPreconditionError(
          "--resume and --fresh need checkpoint.dir in the job file");
    }
    return absl::OkStatus();
  }
  int found = 0;
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(config.checkpoint.dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("shard-", 0) == 0 && name.size() > 5 &&
        name.compare(name.size() - 5, 5, ".ckpt") == 0) {
      ++found;
    }
  }
  if (found > 0 && !resume && !fresh) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint.dir ", config.checkpoint.dir, " holds ", found,
        " checkpoint(s) of an earlier run: pass --resume to continue from "
        "them or --fresh to discard them"));
  }
  if (found == 0 && resume) {
    return absl::FailedPreconditionError(
        absl::StrCat("--resume: checkpoint.dir ", config.checkpoint.dir,
                     " holds no checkpoint"));
  }
  return absl::OkStatus();
}

}  // namespace paramd
