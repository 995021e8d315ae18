#include "tools/ctl/worker_command.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace paramd {

std::vector<std::string> WorkerArgv(const JobConfig& config,
                                    const WorkerLaunch& w) {
  const std::string servers = absl::StrJoin(w.servers, ",");
  if (config.worker.command.empty()) {
    std::vector<std::string> argv = {
        w.worker_binary, "--job", w.job_path, "--rank", absl::StrCat(w.rank),
        "--servers",     servers, "--launch", w.launch, "--log_level",
        w.log_level};
    if (!w.backups.empty()) {
      argv.push_back("--backups");
      argv.push_back(absl::StrJoin(w.backups, ","));
    }
    if (!w.etcd.empty()) {
      argv.push_back("--etcd");
      argv.push_back(w.etcd);
    }
    return argv;
  }
  const std::filesystem::path job =
      std::filesystem::absolute(w.job_path).lexically_normal();
  std::vector<std::string> argv = {
      "/usr/bin/env",
      "-C",
      job.parent_path().string(),
      absl::StrCat("PARAMD_JOB=", job.string()),
      absl::StrCat("PARAMD_RANK=", w.rank),
      absl::StrCat("PARAMD_SERVERS=", servers),
      absl::StrCat("PARAMD_LAUNCH=", w.launch),
      absl::StrCat("PARAMD_LOG_LEVEL=", w.log_level)};
  if (!w.backups.empty()) {
    argv.push_back(
        absl::StrCat("PARAMD_BACKUPS=", absl::StrJoin(w.backups, ",")));
  }
  if (!w.python_path.empty()) {
    const char* existing = std::getenv("PYTHONPATH");
    argv.push_back(
        absl::StrCat("PYTHONPATH=", w.python_path,
                     existing != nullptr && *existing != '\0' ? ":" : "",
                     existing != nullptr ? existing : ""));
  }
  // env(1) would read a first word holding '=' as one more variable.
  if (config.worker.command[0].find('=') != std::string::npos) {
    argv.push_back("--");
  }
  argv.insert(argv.end(), config.worker.command.begin(),
              config.worker.command.end());
  return argv;
}

}  // namespace paramd
