#include "tools/ctl/job_target.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/base/process_setup.h"
#include "common/config/job_file.h"
#include "common/coord/rpc/member_registration.h"
#include "common/launch/slurm.h"

namespace paramd {

std::optional<Target> LoadTarget(const ParsedFlags& flags,
                                 const std::string& command, int* code) {
  if (!flags.Has("job")) {
    std::fprintf(stderr, "paramctl: %s needs --job J.yaml\n", command.c_str());
    *code = 2;
    return std::nullopt;
  }
  *code = 1;
  absl::StatusOr<JobConfig> config = LoadJobConfig(flags.Get("job", ""));
  if (!config.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(config.status().message()).c_str());
    return std::nullopt;
  }
  Target target;
  if (flags.Has("servers")) {
    target.addresses =
        absl::StrSplit(flags.Get("servers", ""), ',', absl::SkipEmpty());
  } else if (absl::Status s = ResolveSlurmServers(&*config, ProcessEnv());
             !s.ok()) {
    std::fprintf(stderr, "paramctl: %s\n", std::string(s.message()).c_str());
    return std::nullopt;
  } else if (absl::Status e =
                 ResolveEtcdServers(&*config, absl::ZeroDuration());
             !e.ok()) {
    // Servers found in etcd: those registered now, no waiting.
    std::fprintf(stderr, "paramctl: %s\n", std::string(e.message()).c_str());
    return std::nullopt;
  } else {
    target.addresses = config->servers;
  }
  if (flags.Has("backups")) {
    target.backups =
        absl::StrSplit(flags.Get("backups", ""), ',', absl::SkipEmpty());
  } else if (!config->servers_from_slurm || !flags.Has("servers")) {
    // (From Slurm, resolved with the servers; with --servers, unknown.)
    target.backups = config->replication.backups;
  }
  for (const auto* list : {&target.addresses, &target.backups}) {
    for (const std::string& a : *list) {
      if (absl::EndsWith(a, ":0")) {
        std::fprintf(stderr,
                     "paramctl: the job lists port 0 (%s); pass the ports "
                     "the servers bound with --servers (and --backups)\n",
                     a.c_str());
        return std::nullopt;
      }
    }
  }
  absl::StatusOr<JobSecurity> security = LoadSecurity(config->security);
  if (!security.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(security.status().message()).c_str());
    return std::nullopt;
  }
  target.security = *std::move(security);
  target.heartbeat_seconds = config->liveness.heartbeat_seconds;
  target.config = *std::move(config);
  return target;
}

}  // namespace paramd
