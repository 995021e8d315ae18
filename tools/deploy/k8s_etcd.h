// A replicated job's own etcd in `paramctl k8s`'s manifests
// (tools/deploy/k8s_manifests.h): a job with replication.factor 2 and no
// coordination.etcd gets one, as under `paramctl run` and `paramctl slurm`,
// so that its shards' replicas are fenced (docs/operations.md, "the fence"):
//   - a Service <name>-etcd (port 2379, "client"),
//   - a StatefulSet <name>-etcd of one pod running Debian's etcd from the
//     paramd image, its data on an emptyDir (kept across a restart of the
//     container, not of the pod), ready once its /health answers,
//   - an init container for the servers and workers that waits for it.
// A job that names its etcd (coordination.etcd) gets none of this.
#ifndef PARAMD_TOOLS_DEPLOY_K8S_ETCD_H_
#define PARAMD_TOOLS_DEPLOY_K8S_ETCD_H_

#include <yaml-cpp/yaml.h>

#include <string>

#include "common/config/job_config.h"

namespace paramd {
namespace k8s {

// Whether the manifests of `config` start an etcd of the job's own.
bool JobRunsEtcd(const JobConfig& config);
// Its client endpoint, HOST:PORT, as the pods reach it.
std::string EtcdEndpoint(const std::string& name, const std::string& ns);
YAML::Node EtcdService(const std::string& name, const std::string& ns);
YAML::Node EtcdStatefulSet(const std::string& name, const std::string& ns,
                           const std::string& image);
// An init container that returns once the etcd at `endpoint` is healthy.
YAML::Node AwaitEtcd(const std::string& endpoint, const std::string& image);

}  // namespace k8s
}  // namespace paramd

#endif  // PARAMD_TOOLS_DEPLOY_K8S_ETCD_H_
