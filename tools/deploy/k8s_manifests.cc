#include "tools/deploy/k8s_manifests.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "tools/deploy/k8s_etcd.h"
#include "tools/deploy/k8s_yaml.h"

namespace paramd {
namespace {

using k8s::Emit;
using k8s::JobMount;
using k8s::JobVolume;
using k8s::kJobMount;
using k8s::Labels;
using k8s::Metadata;
using k8s::Port;
using k8s::Probe;
using k8s::Quoted;
using k8s::Resources;
using k8s::ScrapeAnnotations;

constexpr char kCheckpointMount[] = "/var/lib/paramd/checkpoints";

// The largest parameter bytes any shard holds.
int64_t LargestShardBytes(const JobConfig& config) {
  absl::StatusOr<PartitionPlan> plan = PartitionPlan::Build(
      BuildModelSpec(config.model), config.chunk_bytes, config.num_shards());
  int64_t largest = 0;
  if (!plan.ok()) return largest;
  for (int k = 0; k < plan->num_shards(); ++k) {
    largest = std::max<int64_t>(largest, plan->BytesOnShard(k));
  }
  return largest;
}

}  // namespace

int K8sServerPort(const JobConfig& config) {
  if (config.servers_from_slurm) {
    return config.slurm_port != 0 ? config.slurm_port : 47300;
  }
  std::string host;
  int port = 0;
  if (!config.servers.empty() &&
      ParseHostPort(config.servers[0], &host, &port).ok() && port != 0) {
    return port;
  }
  return 47300;
}

int K8sMetricsPort(const JobConfig& config) {
  return config.metrics.port > 0 ? config.metrics.port : 9400;
}

absl::StatusOr<std::string> K8sName(const std::string& job_id) {
  std::string name;
  for (char c : absl::AsciiStrToLower(job_id)) {
    const bool ok = absl::ascii_isalnum(c);
    if (ok) {
      name += c;
    } else if (!name.empty() && name.back() != '-') {
      name += '-';
    }
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job.id '", job_id, "' has no letters or digits for Kubernetes names"));
  }
  name = absl::StrCat("paramd-", name.substr(0, 40));
  while (name.back() == '-') name.pop_back();
  return name;
}

namespace {

// What every manifest of a job shares: its names, ports and addresses.
struct K8sJob {
  std::string name;      // paramd-<job>: every object's name starts so.
  std::string ns;        // The namespace.
  std::string service;   // The servers' headless Service.
  std::string job_file;  // Where the pods see the job file.
  int servers = 0;
  int workers = 0;
  int port = 0;     // The servers' gRPC port.
  int metrics = 0;  // Every pod's metrics port.
  bool checkpoints = false;
  std::vector<std::string> addresses;  // The servers', by shard.
  // replication.factor 2: the backups' headless Service and addresses.
  std::string backup_service;
  std::vector<std::string> backup_addresses;
  // The job's own etcd (k8s::JobRunsEtcd), HOST:PORT; empty: none.
  std::string etcd;
};

// The pods of one server role: the primaries ("server") or, with replicas,
// their backups ("backup").
struct ServerRole {
  std::string role;       // The component label, and the name's suffix.
  std::string service;    // Its headless Service.
  std::string peer_role;  // The other replica's role, when replicated.
  std::string peer_service;
};

std::vector<ServerRole> ServerRoles(const K8sJob& k) {
  if (k.backup_service.empty()) return {{"server", k.service, "", ""}};
  return {{"server", k.service, "backup", k.backup_service},
          {"backup", k.backup_service, "server", k.service}};
}

// The options paramctl k8s takes, checked; the job without a security
// section (its files would have to come from the user's Secret).
absl::Status CheckK8sOptions(const JobConfig& config, const K8sOptions& o) {
  if (config.servers_from_etcd) {
    return absl::InvalidArgumentError(
        "cluster.servers {etcd: N}: paramctl k8s names the servers by their "
        "StatefulSet's DNS names; list N addresses instead");
  }
  const SecurityConfig& sec = config.security;
  if (!sec.token_file.empty() || sec.tls()) {
    return absl::InvalidArgumentError(
        "the job has a security section: its files must reach the pods "
        "from a Secret of yours; paramctl k8s renders jobs without one "
        "(see docs/deploy.md)");
  }
  const std::string& n = o.namespace_name;
  const bool label =
      !n.empty() && n.size() <= 63 && absl::ascii_isalnum(n.front()) &&
      absl::ascii_isalnum(n.back()) &&
      std::all_of(n.begin(), n.end(), [](char c) {
        return (absl::ascii_isalnum(c) && !absl::ascii_isupper(c)) || c == '-';
      });
  if (!label) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--namespace '", n,
        "': must be a DNS label (lower-case letters, digits and '-', at "
        "most 63)"));
  }
  if (o.image.empty() ||
      std::any_of(o.image.begin(), o.image.end(),
                  [](char c) { return absl::ascii_isspace(c); })) {
    return absl::InvalidArgumentError(
        absl::StrCat("--image '", o.image, "': must be an image reference"));
  }
  return absl::OkStatus();
}

absl::StatusOr<K8sJob> DescribeK8sJob(const JobConfig& config,
                                      const std::string& ns) {
  if (!config.model.tensors_file.empty()) {
    // The pods see the job file alone (a ConfigMap).
    return absl::InvalidArgumentError(absl::StrCat(
        "model.tensors_file: '", config.model.tensors_file,
        "' would not be in the pods; give the list inline as model.tensors "
        "(python3 -m paramd.torch.spec prints it)"));
  }
  K8sJob k;
  absl::StatusOr<std::string> named = K8sName(config.job_id);
  if (!named.ok()) return named.status();
  k.name = *named;
  k.ns = ns;
  k.servers = config.num_shards();
  k.workers = config.num_workers;
  k.port = K8sServerPort(config);
  k.metrics = K8sMetricsPort(config);
  k.job_file = absl::StrCat(kJobMount, "/job.yaml");
  k.service = k.name + "-servers";
  for (int i = 0; i < k.servers; ++i) {
    k.addresses.push_back(absl::StrCat(k.name, "-server-", i, ".", k.service,
                                       ".", ns, ".svc.cluster.local:", k.port));
  }
  if (config.replication.enabled()) {
    k.backup_service = k.name + "-backups";
    for (int i = 0; i < k.servers; ++i) {
      k.backup_addresses.push_back(absl::StrCat(k.name, "-backup-", i, ".",
                                                k.backup_service, ".", ns,
                                                ".svc.cluster.local:", k.port));
    }
  }
  k.checkpoints = !config.checkpoint.dir.empty();
  if (k8s::JobRunsEtcd(config)) k.etcd = k8s::EtcdEndpoint(k.name, ns);
  return k;
}

YAML::Node JobConfigMap(const K8sJob& k, const std::string& job_text) {
  // The job file.
  YAML::Node cm;
  cm["apiVersion"] = "v1";
  cm["kind"] = "ConfigMap";
  cm["metadata"] = Metadata(k.name + "-job", k.ns, k.name, "job");
  cm["data"]["job.yaml"] = job_text;
  return cm;
}

YAML::Node ServersService(const K8sJob& k, const ServerRole& r) {
  // Stable DNS names for the servers (or their backups).
  YAML::Node svc;
  svc["apiVersion"] = "v1";
  svc["kind"] = "Service";
  svc["metadata"] = Metadata(r.service, k.ns, k.name, r.role);
  svc["spec"]["clusterIP"] = "None";
  svc["spec"]["publishNotReadyAddresses"] = true;
  svc["spec"]["selector"] = Labels(k.name, r.role);
  YAML::Node grpc_port;
  grpc_port["name"] = "grpc";
  grpc_port["port"] = k.port;
  grpc_port["targetPort"] = "grpc";
  YAML::Node metrics_port;
  metrics_port["name"] = "metrics";
  metrics_port["port"] = k.metrics;
  metrics_port["targetPort"] = "metrics";
  svc["spec"]["ports"].push_back(grpc_port);
  svc["spec"]["ports"].push_back(metrics_port);
  return svc;
}

// The server container of `r`'s pods: pod K serves shard K, and with
// replicas is told its peer's address.
YAML::Node ServerContainer(const K8sJob& k, const ServerRole& r,
                           const std::string& image, int64_t shard_mib) {
  std::string server_command = absl::StrCat(
      "exec paramd-server --job ", k.job_file, " --shard \"${HOSTNAME##*-}\"",
      " --listen 0.0.0.0:", k.port, " --metrics_listen 0.0.0.0:", k.metrics);
  if (k.checkpoints) {
    absl::StrAppend(&server_command, " --checkpoint_dir ", kCheckpointMount);
  }
  if (!k.etcd.empty()) absl::StrAppend(&server_command, " --etcd ", k.etcd);
  if (!r.peer_role.empty()) {
    absl::StrAppend(&server_command, r.role == "backup" ? " --backup" : "",
                    " --peer ", k.name, "-", r.peer_role, "-${HOSTNAME##*-}.",
                    r.peer_service, ".", k.ns, ".svc.cluster.local:", k.port);
  }
  YAML::Node server;
  server["name"] = "server";
  server["image"] = image;
  server["command"].push_back("/bin/sh");
  server["command"].push_back("-c");
  server["command"].push_back(server_command);
  server["ports"].push_back(Port("grpc", k.port));
  server["ports"].push_back(Port("metrics", k.metrics));
  server["readinessProbe"] = Probe(2, 3);
  server["livenessProbe"] = Probe(10, 6);
  server["resources"] = Resources("1", shard_mib, 0);
  server["volumeMounts"].push_back(JobMount());
  if (k.checkpoints) {
    YAML::Node m;
    m["name"] = "checkpoints";
    m["mountPath"] = kCheckpointMount;
    server["volumeMounts"].push_back(m);
  }
  return server;
}

YAML::Node ServersStatefulSet(const JobConfig& config, const K8sJob& k,
                              const ServerRole& r, const std::string& image) {
  // The servers: pod K (its host name ends in -K) is shard K; with
  // replicas, pod K of the backups is its backup, each told the other.
  const int64_t largest_shard = LargestShardBytes(config);
  const int64_t shard_mib =
      std::max<int64_t>(256, 4 * largest_shard / (1 << 20) + 192);
  const YAML::Node server = ServerContainer(k, r, image, shard_mib);
  YAML::Node sts;
  sts["apiVersion"] = "apps/v1";
  sts["kind"] = "StatefulSet";
  sts["metadata"] = Metadata(k.name + "-" + r.role, k.ns, k.name, r.role);
  sts["spec"]["serviceName"] = r.service;
  sts["spec"]["replicas"] = k.servers;
  sts["spec"]["podManagementPolicy"] = "Parallel";
  sts["spec"]["selector"]["matchLabels"] = Labels(k.name, r.role);
  sts["spec"]["template"]["metadata"]["labels"] = Labels(k.name, r.role);
  sts["spec"]["template"]["metadata"]["annotations"] =
      ScrapeAnnotations(k.metrics);
  // SIGTERM writes a checkpoint; give it time.
  sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 60;
  // The image runs as nobody (65534); the checkpoint volume is made its.
  sts["spec"]["template"]["spec"]["securityContext"]["fsGroup"] = 65534;
  sts["spec"]["template"]["spec"]["containers"].push_back(server);
  if (!k.etcd.empty()) {
    sts["spec"]["template"]["spec"]["initContainers"].push_back(
        k8s::AwaitEtcd(k.etcd, image));
  }
  sts["spec"]["template"]["spec"]["volumes"].push_back(JobVolume(k.name));
  if (!r.peer_role.empty()) {
    // Off the nodes of the other replicas where the scheduler can (soft: a
    // one-node cluster still runs), so one node's death is one replica's.
    YAML::Node term;
    term["weight"] = 100;
    term["podAffinityTerm"]["topologyKey"] = "kubernetes.io/hostname";
    term["podAffinityTerm"]["labelSelector"]["matchLabels"] =
        Labels(k.name, r.peer_role);
    sts["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
       ["preferredDuringSchedulingIgnoredDuringExecution"]
           .push_back(term);
  }
  if (k.checkpoints) {
    YAML::Node claim;
    claim["metadata"]["name"] = "checkpoints";
    claim["spec"]["accessModes"].push_back("ReadWriteOnce");
    claim["spec"]["resources"]["requests"]["storage"] = absl::StrCat(
        std::max<int64_t>(
            1, (largest_shard * 3 * (config.checkpoint.keep + 1)) >> 30) +
            1,
        "Gi");
    sts["spec"]["volumeClaimTemplates"].push_back(claim);
  }
  return sts;
}

// What a worker pod's shell runs: paramd-worker, or the job's
// worker.command (a framework's worker, which reads its rank from
// JOB_COMPLETION_INDEX) in the image's working directory, with
// PARAMD_JOB, PARAMD_SERVERS and, with replicas, PARAMD_BACKUPS set.
std::string WorkerShellCommand(const JobConfig& config, const K8sJob& k) {
  const std::string servers = absl::StrJoin(k.addresses, ",");
  if (config.worker.command.empty()) {
    return absl::StrCat(
        "exec paramd-worker --job ", k.job_file,
        " --rank \"$JOB_COMPLETION_INDEX\" --servers ", servers,
        k.backup_addresses.empty()
            ? ""
            : absl::StrCat(" --backups ",
                           absl::StrJoin(k.backup_addresses, ",")),
        k.etcd.empty() ? "" : absl::StrCat(" --etcd ", k.etcd),
        " --metrics_listen 0.0.0.0:", k.metrics);
  }
  auto quote = [](const std::string& w) {
    return absl::StrCat("'", absl::StrReplaceAll(w, {{"'", "'\\''"}}), "'");
  };
  std::string command;
  for (const std::string& word : config.worker.command) {
    absl::StrAppend(&command, " ", quote(word));
  }
  return absl::StrCat(
      "PARAMD_JOB=", k.job_file, " PARAMD_SERVERS=", servers,
      k.backup_addresses.empty()
          ? ""
          : absl::StrCat(" PARAMD_BACKUPS=",
                         absl::StrJoin(k.backup_addresses, ",")),
      " exec", command);
}

YAML::Node WorkersJob(const JobConfig& config, const K8sJob& k,
                      const std::string& image) {
  // The workers: an Indexed Job, rank = completion index.
  const bool cuda = config.worker.device == "cuda";
  YAML::Node worker;
  worker["name"] = "worker";
  worker["image"] = image;
  worker["command"].push_back("/bin/sh");
  worker["command"].push_back("-c");
  worker["command"].push_back(WorkerShellCommand(config, k));
  worker["ports"].push_back(Port("metrics", k.metrics));
  worker["resources"] =
      Resources(absl::StrCat(config.worker.threads), 2048, cuda ? 1 : 0);
  worker["volumeMounts"].push_back(JobMount());
  YAML::Node job;
  job["apiVersion"] = "batch/v1";
  job["kind"] = "Job";
  job["metadata"] = Metadata(k.name + "-worker", k.ns, k.name, "worker");
  job["spec"]["completionMode"] = "Indexed";
  job["spec"]["completions"] = k.workers;
  job["spec"]["parallelism"] = k.workers;
  // restart.max restarts per worker, as paramctl run allows.
  job["spec"]["backoffLimit"] = std::max(1, config.restart.max * k.workers);
  job["spec"]["template"]["metadata"]["labels"] = Labels(k.name, "worker");
  job["spec"]["template"]["metadata"]["annotations"] =
      ScrapeAnnotations(k.metrics);
  job["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure";
  job["spec"]["template"]["spec"]["containers"].push_back(worker);
  if (!k.etcd.empty()) {
    job["spec"]["template"]["spec"]["initContainers"].push_back(
        k8s::AwaitEtcd(k.etcd, image));
  }
  job["spec"]["template"]["spec"]["volumes"].push_back(JobVolume(k.name));
  return job;
}

YAML::Node ServersDisruptionBudget(const K8sJob& k, const ServerRole& r) {
  // Voluntary disruptions (drains, upgrades) wait for the job: every shard
  // is needed (with replicas, every replica: an eviction would leave its
  // shard on one server).
  YAML::Node pdb;
  pdb["apiVersion"] = "policy/v1";
  pdb["kind"] = "PodDisruptionBudget";
  pdb["metadata"] = Metadata(r.service, k.ns, k.name, r.role);
  pdb["spec"]["minAvailable"] = k.servers;
  pdb["spec"]["selector"]["matchLabels"] = Labels(k.name, r.role);
  return pdb;
}

}  // namespace

absl::StatusOr<std::string> K8sManifests(const JobConfig& config,
                                         const K8sOptions& o) {
  if (absl::Status s = CheckK8sOptions(config, o); !s.ok()) return s;
  absl::StatusOr<K8sJob> k = DescribeK8sJob(config, o.namespace_name);
  if (!k.ok()) return k.status();
  std::vector<YAML::Node> docs = {JobConfigMap(*k, o.job_text)};
  if (!k->etcd.empty()) {
    docs.push_back(k8s::EtcdService(k->name, k->ns));
    docs.push_back(k8s::EtcdStatefulSet(k->name, k->ns, o.image));
  }
  const std::vector<ServerRole> roles = ServerRoles(*k);
  for (const ServerRole& r : roles) docs.push_back(ServersService(*k, r));
  for (const ServerRole& r : roles) {
    docs.push_back(ServersStatefulSet(config, *k, r, o.image));
  }
  docs.push_back(WorkersJob(config, *k, o.image));
  for (const ServerRole& r : roles) {
    docs.push_back(ServersDisruptionBudget(*k, r));
  }
  std::string out =
      absl::StrCat("# Written by `paramctl k8s` for job '", config.job_id,
                   "'. Apply with kubectl apply -f.\n");
  for (const YAML::Node& doc : docs) {
    absl::StrAppend(&out, "---\n", Emit(doc), "\n");
  }
  return out;
}

}  // namespace paramd
