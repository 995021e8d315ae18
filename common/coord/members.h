// Where a job's processes register in its coordinator (coordination.etcd)
// and what each registration says: one key per process under
// /paramd/JOB/members/, "server/K" (shard K's server at cluster.servers[K]),
// "backup/K" (its backup) or "worker/R", its value "ADDRESS HOST PID"
// (ADDRESS "-" for a worker, which serves nothing), held by the process's
// lease so that it goes when the process does.
#ifndef PARAMD_COMMON_COORD_MEMBERS_H_
#define PARAMD_COMMON_COORD_MEMBERS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace paramd {

struct JobMember {
  std::string kind;     // "server", "backup" or "worker".
  int id = 0;           // The shard, or the rank.
  std::string address;  // Where it serves ("-": nowhere).
  std::string host;
  int64_t pid = 0;
};

// This process as member `kind` `id`: its host's name and its pid, its
// address "-" (a server sets where it serves).
JobMember ThisProcess(const std::string& kind, int id);

// The prefix every member of job `job_id` registers under.
std::string MembersPrefix(const std::string& job_id);
// The key of `member` in job `job_id`.
std::string MemberKey(const std::string& job_id, const JobMember& member);
// What `member`'s key holds.
std::string MemberValue(const JobMember& member);
// The member a key of MembersPrefix(job_id) and its value name;
// INVALID_ARGUMENT naming the key when they are not a registration.
absl::StatusOr<JobMember> ParseMember(const std::string& job_id,
                                      const std::string& key,
                                      const std::string& value);

}  // namespace paramd

#endif  // PARAMD_COMMON_COORD_MEMBERS_H_
