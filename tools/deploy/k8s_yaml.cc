#include "tools/deploy/k8s_yaml.h"

#include "absl/strings/str_cat.h"

namespace paramd::k8s {
namespace {

constexpr char kQuotedTag[] = "!paramd-quoted";

void EmitNode(YAML::Emitter& out, const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      out << YAML::BeginMap;
      for (const auto& kv : node) {
        out << YAML::Key << kv.first.Scalar() << YAML::Value;
        EmitNode(out, kv.second);
      }
      out << YAML::EndMap;
      break;
    case YAML::NodeType::Sequence:
      out << YAML::BeginSeq;
      for (const auto& item : node) EmitNode(out, item);
      out << YAML::EndSeq;
      break;
    default:
      if (node.Tag() == kQuotedTag) {
        out << YAML::DoubleQuoted << node.Scalar();
      } else if (node.Scalar().find('\n') != std::string::npos) {
        out << YAML::Literal << node.Scalar();
      } else {
        out << node.Scalar();
      }
  }
}

}  // namespace

std::string Emit(const YAML::Node& node) {
  YAML::Emitter out;
  EmitNode(out, node);
  return out.c_str();
}

// A scalar that must stay a string ("true", "9400"): emitted quoted.
YAML::Node Quoted(const std::string& value) {
  YAML::Node n(value);
  n.SetTag(kQuotedTag);
  return n;
}

YAML::Node Labels(const std::string& name, const std::string& role) {
  YAML::Node labels;
  labels["app.kubernetes.io/name"] = "paramd";
  labels["app.kubernetes.io/instance"] = name;
  labels["app.kubernetes.io/component"] = role;
  return labels;
}

YAML::Node Metadata(const std::string& name, const std::string& ns,
                    const std::string& instance, const std::string& role) {
  YAML::Node m;
  m["name"] = name;
  m["namespace"] = Quoted(ns);
  m["labels"] = Labels(instance, role);
  return m;
}

YAML::Node Port(const std::string& name, int port) {
  YAML::Node p;
  p["name"] = name;
  p["containerPort"] = port;
  p["protocol"] = "TCP";
  return p;
}

YAML::Node Probe(int period, int failures) {
  YAML::Node probe;
  probe["httpGet"]["path"] = "/healthz";
  probe["httpGet"]["port"] = "metrics";
  probe["periodSeconds"] = period;
  probe["timeoutSeconds"] = 2;
  probe["failureThreshold"] = failures;
  return probe;
}

YAML::Node Resources(const std::string& cpu, int64_t memory_mib, int gpus) {
  YAML::Node r;
  r["requests"]["cpu"] = Quoted(cpu);
  r["requests"]["memory"] = absl::StrCat(memory_mib, "Mi");
  r["limits"]["memory"] = absl::StrCat(memory_mib, "Mi");
  if (gpus > 0) {
    r["requests"]["nvidia.com/gpu"] = gpus;
    r["limits"]["nvidia.com/gpu"] = gpus;
  }
  return r;
}

YAML::Node JobVolume(const std::string& name) {
  YAML::Node v;
  v["name"] = "job";
  v["configMap"]["name"] = name + "-job";
  return v;
}

YAML::Node JobMount() {
  YAML::Node m;
  m["name"] = "job";
  m["mountPath"] = kJobMount;
  m["readOnly"] = true;
  return m;
}

YAML::Node ScrapeAnnotations(int metrics_port) {
  YAML::Node a;
  a["prometheus.io/scrape"] = Quoted("true");
  a["prometheus.io/port"] = Quoted(absl::StrCat(metrics_port));
  a["prometheus.io/path"] = "/metrics";
  return a;
}

}  // namespace paramd::k8s
