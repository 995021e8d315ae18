#include "tools/ctl/status_command.h"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/coord/members.h"
#include "common/coord/rpc/member_registration.h"
#include "tools/ctl/job_target.h"
#include "tools/ctl/rpc/status_client.h"
#include "tools/ctl/status_format.h"

namespace paramd {

int StatusCommand(const ParsedFlags& flags) {
  int code = 0;
  std::optional<Target> target = LoadTarget(flags, "status", &code);
  if (!target) return code;
  // Every replica: the table shows the one serving each shard.
  std::vector<std::string> addresses = target->addresses;
  addresses.insert(addresses.end(), target->backups.begin(),
                   target->backups.end());
  const int shards = static_cast<int>(target->addresses.size());
  const JobSecurity* security = &target->security;
  const bool json = flags.Has("json");
  // coordination.etcd: the members, as etcd lists them now.
  using Members = absl::StatusOr<std::vector<JobMember>>;
  auto members = [&target]() -> std::optional<Members> {
    if (!target->config.coordination.enabled()) return std::nullopt;
    return ListJobMembers(target->config);
  };
  auto format = [&](const std::vector<ServerStatus>& all,
                    const std::optional<Members>& m) {
    if (json) return FormatStatusJson(all, m ? &*m : nullptr);
    std::string out = target->backups.empty()
                          ? FormatStatusTable(all)
                          : FormatStatusTable(ServingReplicas(all, shards)) +
                                ReplicaLines(all, shards);
    if (m && m->ok()) out += MemberLines(**m);
    if (m && !m->ok()) {
      out += absl::StrCat("\nMEMBERS (coordination.etcd)\n  ",
                          m->status().message(), "\n");
    }
    return out;
  };
  if (flags.Has("watch")) {
    // Refreshes in place every second until interrupted.
    while (true) {
      std::printf("\033[H\033[2J%s",
                  format(QueryAllStatus(addresses, *security, absl::Seconds(1)),
                         members())
                      .c_str());
      std::fflush(stdout);
      absl::SleepFor(absl::Seconds(1));
    }
  }
  const std::vector<ServerStatus> servers =
      QueryAllStatus(addresses, *security, absl::Seconds(3));
  const std::optional<Members> listed = members();
  std::fputs(format(servers, listed).c_str(), stdout);
  for (const ServerStatus& s : ServingReplicas(servers, shards)) {
    if (!s.status.ok()) return 1;
  }
  return listed && !listed->ok() ? 1 : 0;
}

}  // namespace paramd
