#include "common/launch/slurm.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"

namespace paramd {
namespace {

// Most hosts one list may expand to: a bound against "n[0-999999999]".
constexpr size_t kMaxHosts = 1 << 20;

// Splits at commas outside brackets.
absl::StatusOr<std::vector<std::string>> SplitTop(absl::string_view list) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("host list '", list, "': unbalanced ']'"));
    }
    if (c == ',' && depth == 0) {
      items.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (depth != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host list '", list, "': unbalanced '['"));
  }
  items.push_back(item);
  return items;
}

// The numbers of one bracket's body ("01-03,7"), as padded strings.
absl::StatusOr<std::vector<std::string>> ExpandRanges(absl::string_view body,
                                                      absl::string_view list) {
  std::vector<std::string> out;
  for (absl::string_view range : absl::StrSplit(body, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(range, '-');
    uint64_t lo = 0, hi = 0;
    const bool ok =
        !ends.empty() && ends.size() <= 2 && !ends[0].empty() &&
        absl::SimpleAtoi(ends[0], &lo) && absl::SimpleAtoi(ends.back(), &hi) &&
        absl::ascii_isdigit(ends[0][0]) &&
        absl::ascii_isdigit(ends.back().empty() ? 'x' : ends.back()[0]);
    if (!ok || hi < lo) {
      return absl::InvalidArgumentError(absl::StrCat(
          "host list '", list, "': bad range '", range, "' in brackets"));
    }
    if (hi - lo >= kMaxHosts) {
      return absl::InvalidArgumentError(
          absl::StrCat("host list '", list, "': range '", range, "' too long"));
    }
    const size_t width = ends[0].size();
    for (uint64_t n = lo; n <= hi; ++n) {
      std::string digits = absl::StrCat(n);
      if (digits.size() < width) {
        digits.insert(0, width - digits.size(), '0');
      }
      out.push_back(std::move(digits));
    }
  }
  return out;
}

// Expands one item with any number of bracket groups.
absl::Status ExpandItem(absl::string_view item, absl::string_view list,
                        std::vector<std::string>* out) {
  const size_t open = item.find('[');
  if (open == absl::string_view::npos) {
    out->push_back(std::string(item));
    return absl::OkStatus();
  }
  const size_t close = item.find(']', open);
  ASSIGN_OR_RETURN(std::vector<std::string> numbers,
                   ExpandRanges(item.substr(open + 1, close - open - 1), list));
  const absl::string_view prefix = item.substr(0, open);
  const absl::string_view rest = item.substr(close + 1);
  for (const std::string& n : numbers) {
    RETURN_IF_ERROR(ExpandItem(absl::StrCat(prefix, n, rest), list, out));
    if (out->size() > kMaxHosts) {
      return absl::InvalidArgumentError(
          absl::StrCat("host list '", list, "' names too many hosts"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const char* name) { return std::getenv(name); };
}

absl::StatusOr<std::vector<std::string>> ExpandHostList(
    absl::string_view list) {
  ASSIGN_OR_RETURN(std::vector<std::string> items, SplitTop(list));
  std::vector<std::string> hosts;
  for (const std::string& item : items) {
    if (item.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("host list '", list, "': empty host name"));
    }
    RETURN_IF_ERROR(ExpandItem(item, list, &hosts));
  }
  return hosts;
}

int BasePortForJob(uint64_t job_id) {
  return 20000 + static_cast<int>(job_id % 2000) * 16;
}

int ServersPerNode(int servers, int nodes) {
  return (servers + nodes - 1) / nodes;
}

namespace {

// Where the rule puts a job's servers: the job's nodes in order, servers
// per node and the base port.
struct Placement {
  std::vector<std::string> nodes;
  int per_node = 1;
  int base = 0;
};

absl::StatusOr<Placement> SlurmPlacement(const JobConfig& config,
                                         const EnvLookup& env) {
  const char* job_id = env("SLURM_JOB_ID");
  if (job_id == nullptr) {
    return absl::FailedPreconditionError(
        "cluster.servers is {slurm: N} but this process is not inside a "
        "Slurm job (SLURM_JOB_ID is unset): start it with sbatch/srun "
        "(paramctl slurm writes the script), or pass --servers");
  }
  uint64_t id = 0;
  if (!absl::SimpleAtoi(job_id, &id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_JOB_ID '", job_id, "' is not a number"));
  }
  const char* list = env("SLURM_JOB_NODELIST");
  if (list == nullptr) list = env("SLURM_NODELIST");
  if (list == nullptr) {
    return absl::FailedPreconditionError(
        "inside a Slurm job but SLURM_JOB_NODELIST is unset");
  }
  Placement p;
  ASSIGN_OR_RETURN(p.nodes, ExpandHostList(list));
  p.per_node =
      ServersPerNode(config.num_shards(), static_cast<int>(p.nodes.size()));
  p.base = config.slurm_port != 0 ? config.slurm_port : BasePortForJob(id);
  return p;
}

}  // namespace

int BackupNode(int shard, int servers, int per_node) {
  const int server_nodes = (servers + per_node - 1) / per_node;
  return (shard / per_node + 1) % server_nodes;
}

absl::StatusOr<std::vector<std::string>> SlurmServerAddresses(
    const JobConfig& config, const EnvLookup& env) {
  ASSIGN_OR_RETURN(const Placement p, SlurmPlacement(config, env));
  std::vector<std::string> addresses;
  for (int k = 0; k < config.num_shards(); ++k) {
    addresses.push_back(absl::StrCat(p.nodes[k / p.per_node], ":", p.base + k));
  }
  return addresses;
}

absl::StatusOr<std::vector<std::string>> SlurmBackupAddresses(
    const JobConfig& config, const EnvLookup& env) {
  ASSIGN_OR_RETURN(const Placement p, SlurmPlacement(config, env));
  const int n = config.num_shards();
  std::vector<std::string> addresses;
  for (int k = 0; k < n; ++k) {
    addresses.push_back(absl::StrCat(p.nodes[BackupNode(k, n, p.per_node)], ":",
                                     p.base + n + k));
  }
  return addresses;
}

absl::Status ResolveSlurmServers(JobConfig* config, const EnvLookup& env) {
  if (!config->servers_from_slurm) return absl::OkStatus();
  ASSIGN_OR_RETURN(config->servers, SlurmServerAddresses(*config, env));
  if (config->replication.enabled()) {
    ASSIGN_OR_RETURN(config->replication.backups,
                     SlurmBackupAddresses(*config, env));
  }
  return absl::OkStatus();
}

}  // namespace paramd
