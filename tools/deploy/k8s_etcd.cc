#include "tools/deploy/k8s_etcd.h"

#include "absl/strings/str_cat.h"
#include "tools/deploy/k8s_yaml.h"

namespace paramd {
namespace k8s {
namespace {

constexpr int kClientPort = 2379;
constexpr char kDataMount[] = "/var/lib/etcd";

}  // namespace

bool JobRunsEtcd(const JobConfig& config) {
  return config.replication.enabled() && config.coordination.etcd.empty();
}

std::string EtcdEndpoint(const std::string& name, const std::string& ns) {
  return absl::StrCat(name, "-etcd.", ns, ".svc.cluster.local:", kClientPort);
}

YAML::Node EtcdService(const std::string& name, const std::string& ns) {
  YAML::Node svc;
  svc["apiVersion"] = "v1";
  svc["kind"] = "Service";
  svc["metadata"] = Metadata(name + "-etcd", ns, name, "etcd");
  svc["spec"]["selector"] = Labels(name, "etcd");
  YAML::Node port;
  port["name"] = "client";
  port["port"] = kClientPort;
  port["targetPort"] = "client";
  svc["spec"]["ports"].push_back(port);
  return svc;
}

YAML::Node EtcdStatefulSet(const std::string& name, const std::string& ns,
                           const std::string& image) {
  // One member: its peer URL stays inside the pod.
  const std::string peer = "http://127.0.0.1:2380";
  YAML::Node etcd;
  etcd["name"] = "etcd";
  etcd["image"] = image;
  for (const std::string& word :
       {std::string("etcd"), std::string("--name"), std::string("paramd"),
        std::string("--data-dir"), absl::StrCat(kDataMount, "/data"),
        std::string("--listen-client-urls"),
        absl::StrCat("http://0.0.0.0:", kClientPort),
        std::string("--advertise-client-urls"),
        absl::StrCat("http://", EtcdEndpoint(name, ns)),
        std::string("--listen-peer-urls"), peer,
        std::string("--initial-advertise-peer-urls"), peer,
        std::string("--initial-cluster"), absl::StrCat("paramd=", peer),
        std::string("--log-level"), std::string("warn")}) {
    etcd["command"].push_back(word);
  }
  etcd["ports"].push_back(Port("client", kClientPort));
  YAML::Node probe;
  probe["httpGet"]["path"] = "/health";
  probe["httpGet"]["port"] = "client";
  probe["periodSeconds"] = 2;
  probe["timeoutSeconds"] = 2;
  probe["failureThreshold"] = 3;
  etcd["readinessProbe"] = probe;
  probe["periodSeconds"] = 10;
  probe["failureThreshold"] = 6;
  etcd["livenessProbe"] = probe;
  etcd["resources"] = Resources("250m", 256, 0);
  YAML::Node mount;
  mount["name"] = "data";
  mount["mountPath"] = kDataMount;
  etcd["volumeMounts"].push_back(mount);

  YAML::Node sts;
  sts["apiVersion"] = "apps/v1";
  sts["kind"] = "StatefulSet";
  sts["metadata"] = Metadata(name + "-etcd", ns, name, "etcd");
  sts["spec"]["serviceName"] = name + "-etcd";
  sts["spec"]["replicas"] = 1;
  sts["spec"]["selector"]["matchLabels"] = Labels(name, "etcd");
  sts["spec"]["template"]["metadata"]["labels"] = Labels(name, "etcd");
  // The image runs as nobody (65534); the data volume is made its.
  sts["spec"]["template"]["spec"]["securityContext"]["fsGroup"] = 65534;
  sts["spec"]["template"]["spec"]["containers"].push_back(etcd);
  YAML::Node data;
  data["name"] = "data";
  data["emptyDir"] = YAML::Node(YAML::NodeType::Map);
  sts["spec"]["template"]["spec"]["volumes"].push_back(data);
  return sts;
}

YAML::Node AwaitEtcd(const std::string& endpoint, const std::string& image) {
  YAML::Node init;
  init["name"] = "await-etcd";
  init["image"] = image;
  init["command"].push_back("/bin/sh");
  init["command"].push_back("-c");
  init["command"].push_back(
      absl::StrCat("until etcdctl --endpoints=", endpoint,
                   " --dial-timeout=2s endpoint health; do sleep 1; done"));
  return init;
}

}  // namespace k8s
}  // namespace paramd
