// The small parts of paramctl k8s's manifests as yaml-cpp nodes (labels,
// metadata, ports, probes, resources, the job's volume and mount,
// Prometheus' annotations), and their emission: scalars that must stay
// strings quoted, multi-line ones as literal blocks.
#ifndef PARAMD_TOOLS_DEPLOY_K8S_YAML_H_
#define PARAMD_TOOLS_DEPLOY_K8S_YAML_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

namespace paramd::k8s {

// Where the job file's ConfigMap is mounted in every pod.
inline constexpr char kJobMount[] = "/etc/paramd";

// A scalar that must stay a string ("true", "9400"): emitted quoted.
YAML::Node Quoted(const std::string& value);
// paramd's labels for the pods of `name`'s `role`.
YAML::Node Labels(const std::string& name, const std::string& role);
YAML::Node Metadata(const std::string& name, const std::string& ns,
                    const std::string& instance, const std::string& role);
YAML::Node Port(const std::string& name, int port);
// An HTTP probe of /healthz on the metrics port.
YAML::Node Probe(int period, int failures);
YAML::Node Resources(const std::string& cpu, int64_t memory_mib, int gpus);
// The job file's ConfigMap ("NAME-job") as a volume, and its mount.
YAML::Node JobVolume(const std::string& name);
YAML::Node JobMount();
YAML::Node ScrapeAnnotations(int metrics_port);

// The document: like yaml-cpp's own emission, but Quoted() scalars are
// double quoted and multi-line ones (the job file) are literal blocks.
std::string Emit(const YAML::Node& node);

}  // namespace paramd::k8s

#endif  // PARAMD_TOOLS_DEPLOY_K8S_YAML_H_
