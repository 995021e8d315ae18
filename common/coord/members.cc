#include "common/coord/members.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace paramd {

JobMember ThisProcess(const std::string& kind, int id) {
  JobMember m;
  m.kind = kind;
  m.id = id;
  m.address = "-";
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) m.host = host;
  m.pid = getpid();
  return m;
}

std::string MembersPrefix(const std::string& job_id) {
  return absl::StrCat("/paramd/", job_id, "/members/");
}

std::string MemberKey(const std::string& job_id, const JobMember& member) {
  return absl::StrCat(MembersPrefix(job_id), member.kind, "/", member.id);
}

std::string MemberValue(const JobMember& member) {
  return absl::StrCat(member.address.empty() ? "-" : member.address, " ",
                      member.host.empty() ? "-" : member.host, " ", member.pid);
}

absl::StatusOr<JobMember> ParseMember(const std::string& job_id,
                                      const std::string& key,
                                      const std::string& value) {
  auto bad = [&key](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("member key \"", key, "\": ", why));
  };
  absl::string_view rest = key;
  if (!absl::ConsumePrefix(&rest, MembersPrefix(job_id))) {
    return bad(absl::StrCat("not under ", MembersPrefix(job_id)));
  }
  const std::vector<std::string> parts = absl::StrSplit(rest, '/');
  JobMember m;
  if (parts.size() != 2 ||
      (parts[0] != "server" && parts[0] != "backup" && parts[0] != "worker")) {
    return bad("expected server/K, backup/K or worker/R after the prefix");
  }
  m.kind = parts[0];
  if (!absl::SimpleAtoi(parts[1], &m.id) || m.id < 0) {
    return bad(absl::StrCat("'", parts[1], "' is not a shard or rank"));
  }
  const std::vector<std::string> fields =
      absl::StrSplit(value, ' ', absl::SkipEmpty());
  if (fields.size() != 3 || !absl::SimpleAtoi(fields[2], &m.pid)) {
    return bad(
        absl::StrCat("value \"", value, "\" is not \"ADDRESS HOST PID\""));
  }
  m.address = fields[0];
  m.host = fields[1];
  return m;
}

}  // namespace paramd
