// The job file's `cluster` section: the servers (a list of "host:port"
// addresses, {slurm: N, port: P} for servers placed by Slurm, or {etcd: N}
// for servers found in the job's coordinator) and the number of workers.
// Declared in common/config/job_sections.h, called by the job-file parser.

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/job_sections.h"

namespace paramd {
namespace {

// cluster.servers: {slurm: N, port: P}.
absl::Status ParseSlurmServers(YamlReader& r, const YAML::Node& servers,
                               JobConfig* c) {
  RETURN_IF_ERROR(
      r.CheckMapping(servers, "cluster.servers", {"slurm", "port"}));
  int count = 0;
  RETURN_IF_ERROR(r.Get(servers, "cluster.servers", "slurm", true, &count));
  if (count < 1 || count > 1024) {
    return r.Error(servers["slurm"], "cluster.servers.slurm",
                   "must be between 1 and 1024 servers");
  }
  RETURN_IF_ERROR(
      r.Get(servers, "cluster.servers", "port", false, &c->slurm_port));
  if (c->slurm_port < 0 || c->slurm_port + count - 1 > 65535) {
    return r.Error(servers["port"], "cluster.servers.port",
                   absl::StrCat("must be 0 (from the job id) or a port "
                                "with room for ",
                                count, " servers"));
  }
  c->servers_from_slurm = true;
  c->servers.assign(count, "");
  return absl::OkStatus();
}

// cluster.servers: {etcd: N}.
absl::Status ParseEtcdServers(YamlReader& r, const YAML::Node& servers,
                              JobConfig* c) {
  RETURN_IF_ERROR(r.CheckMapping(servers, "cluster.servers", {"etcd"}));
  int count = 0;
  RETURN_IF_ERROR(r.Get(servers, "cluster.servers", "etcd", true, &count));
  if (count < 1 || count > 1024) {
    return r.Error(servers["etcd"], "cluster.servers.etcd",
                   "must be between 1 and 1024 servers");
  }
  c->servers_from_etcd = true;
  c->servers.assign(count, "0.0.0.0:0");
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseClusterSection(YamlReader& r, const YAML::Node& cluster,
                                 JobConfig* c) {
  const YAML::Node servers = cluster["servers"];
  if (!servers.IsDefined() || servers.IsNull()) {
    return r.MissingError(cluster, "cluster", "cluster.servers",
                          "missing required field");
  }
  if (servers.IsMap()) {
    RETURN_IF_ERROR(servers["etcd"].IsDefined()
                        ? ParseEtcdServers(r, servers, c)
                        : ParseSlurmServers(r, servers, c));
  } else if (!servers.IsSequence() || servers.size() == 0) {
    return r.Error(servers, "cluster.servers",
                   "expected a non-empty list of \"host:port\" addresses, "
                   "{slurm: N} or {etcd: N}");
  }
  std::set<std::string> seen;
  for (size_t i = 0; servers.IsSequence() && i < servers.size(); ++i) {
    const std::string field = absl::StrCat("cluster.servers[", i, "]");
    if (!servers[i].IsScalar()) {
      return r.Error(servers[i], field, "expected \"host:port\"");
    }
    const std::string address = servers[i].Scalar();
    std::string host;
    int port = 0;
    if (absl::Status s = ParseHostPort(address, &host, &port); !s.ok()) {
      return r.Error(servers[i], field, std::string(s.message()));
    }
    if (port != 0 && !seen.insert(address).second) {
      return r.Error(servers[i], field,
                     absl::StrCat("address '", address, "' listed twice"));
    }
    c->servers.push_back(address);
  }
  RETURN_IF_ERROR(r.Get(cluster, "cluster", "workers", true, &c->num_workers));
  if (c->num_workers < 1 || c->num_workers > 4096) {
    return r.Error(cluster["workers"], "cluster.workers",
                   "must be between 1 and 4096");
  }
  return absl::OkStatus();
}

}  // namespace paramd
