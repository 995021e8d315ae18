// The Kubernetes manifests of `paramctl k8s`: one multi-document YAML with
//   - a ConfigMap holding the job file (mounted at /etc/paramd/job.yaml),
//   - a headless Service and a StatefulSet for the servers: pod K of the
//     StatefulSet is shard K, reachable at the stable DNS name
//     <name>-server-K.<name>-servers.<namespace>.svc.cluster.local,
//     with readiness and liveness probes on its /healthz; a
//     volumeClaimTemplate for checkpoints when the job has checkpoint.dir,
//   - an Indexed Job for the workers (rank = the completion index),
//   - a PodDisruptionBudget that keeps every server up through voluntary
//     disruptions (a missing shard stalls the whole job),
//   - with replication.factor 2 and no coordination.etcd, an etcd of the
//     job's own that fences the replicas (tools/deploy/k8s_etcd.h), given
//     to every paramd-server and paramd-worker with --etcd,
// with resource requests and limits (nvidia.com/gpu for workers when the
// job's worker.device is cuda) and Prometheus scrape annotations.
#ifndef PARAMD_TOOLS_DEPLOY_K8S_MANIFESTS_H_
#define PARAMD_TOOLS_DEPLOY_K8S_MANIFESTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"

namespace paramd {

struct K8sOptions {
  std::string image = "paramd:latest";
  std::string namespace_name = "default";
  // The job file's text, as the ConfigMap carries it.
  std::string job_text;
};

// The gRPC port every server pod listens on: the port of the job's first
// server address (or cluster.servers.port for Slurm-style jobs), else 47300.
int K8sServerPort(const JobConfig& config);
// The metrics port of every pod: metrics.port, else 9400 (probes need it).
int K8sMetricsPort(const JobConfig& config);
// The job id as a DNS label for object names ("paramd-" prefix, lower
// case, [a-z0-9-], at most 40 characters); InvalidArgument when nothing of
// it is usable.
absl::StatusOr<std::string> K8sName(const std::string& job_id);

// The manifests, or InvalidArgument naming what cannot be rendered (a job
// with a security section: its files must come from a Secret you make).
absl::StatusOr<std::string> K8sManifests(const JobConfig& config,
                                         const K8sOptions& options);

}  // namespace paramd

#endif  // PARAMD_TOOLS_DEPLOY_K8S_MANIFESTS_H_
