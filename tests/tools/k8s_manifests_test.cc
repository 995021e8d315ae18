// paramctl k8s's manifests (tools/deploy/k8s_manifests.h), parsed back and
// checked object by object; kubectl reads them in kubectl_test.
#include "tools/deploy/k8s_manifests.h"

#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config/job_file.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

struct Rendered {
  JobConfig config;
  std::string text;
  std::vector<YAML::Node> docs;
  const YAML::Node& Kind(const std::string& kind) const {
    for (const YAML::Node& d : docs) {
      if (d["kind"].as<std::string>() == kind) return d;
    }
    FAIL("no " << kind);
    return docs[0];
  }
};

// A job of 3 servers and 2 workers, with `extra` YAML appended.
Rendered Render(const std::string& extra, const std::string& ns = "ml") {
  testing::JobOptions o;
  o.servers = {"10.0.0.1:47400", "10.0.0.2:47400", "10.0.0.3:47400"};
  const std::string yaml = testing::JobYaml(o) + extra;
  const std::string path =
      testing::WriteFile(testing::NewTempDir() + "/job.yaml", yaml);
  Rendered r;
  absl::StatusOr<JobConfig> config = LoadJobConfig(path);
  REQUIRE(config.ok());
  r.config = *config;
  K8sOptions options;
  options.job_text = yaml;
  options.image = "registry.example/paramd:1.0";
  options.namespace_name = ns;
  absl::StatusOr<std::string> text = K8sManifests(*config, options);
  REQUIRE(text.ok());
  r.text = *text;
  r.docs = YAML::LoadAll(r.text);
  return r;
}

std::string Str(const YAML::Node& n) { return n.as<std::string>(); }

TEST_CASE("k8s: servers are a StatefulSet behind a headless Service", "[k8s]") {
  const Rendered r = Render("metrics:\n  port: 9500\n");
  REQUIRE(r.docs.size() == 5);
  const std::vector<std::string> kinds = {"ConfigMap", "Service", "StatefulSet",
                                          "Job", "PodDisruptionBudget"};
  for (size_t i = 0; i < kinds.size(); ++i) {
    CHECK(Str(r.docs[i]["kind"]) == kinds[i]);
    CHECK(Str(r.docs[i]["metadata"]["namespace"]) == "ml");
  }
  const YAML::Node& svc = r.Kind("Service");
  const YAML::Node& sts = r.Kind("StatefulSet");
  CHECK(Str(svc["spec"]["clusterIP"]) == "None");
  CHECK(Str(sts["spec"]["serviceName"]) == Str(svc["metadata"]["name"]));
  CHECK(sts["spec"]["replicas"].as<int>() == 3);
  // Without replicas nothing to keep apart.
  CHECK_FALSE(sts["spec"]["template"]["spec"]["affinity"].IsDefined());
  // Selectors pick the template's pods, and the Service picks the servers.
  const YAML::Node labels = sts["spec"]["template"]["metadata"]["labels"];
  for (const auto& kv : sts["spec"]["selector"]["matchLabels"]) {
    CHECK(Str(labels[Str(kv.first)]) == Str(kv.second));
    CHECK(Str(svc["spec"]["selector"][Str(kv.first)]) == Str(kv.second));
  }
  const YAML::Node c = sts["spec"]["template"]["spec"]["containers"][0];
  CHECK(Str(c["image"]) == "registry.example/paramd:1.0");
  const std::string command = Str(c["command"][2]);
  CHECK(absl::StrContains(command, "--shard \"${HOSTNAME##*-}\""));
  CHECK(absl::StrContains(command, "--listen 0.0.0.0:47400"));
  CHECK(absl::StrContains(command, "--metrics_listen 0.0.0.0:9500"));
  CHECK(c["ports"][0]["containerPort"].as<int>() == 47400);
  for (const char* probe : {"readinessProbe", "livenessProbe"}) {
    CHECK(Str(c[probe]["httpGet"]["path"]) == "/healthz");
    CHECK(Str(c[probe]["httpGet"]["port"]) == "metrics");
  }
  CHECK(Str(c["resources"]["requests"]["cpu"]) == "1");
  CHECK(c["resources"]["limits"]["memory"].IsDefined());
  CHECK_FALSE(c["resources"]["limits"]["nvidia.com/gpu"].IsDefined());
  // Scrape annotations are strings, as Kubernetes requires.
  CHECK(absl::StrContains(r.text, "prometheus.io/scrape: \"true\""));
  CHECK(absl::StrContains(r.text, "prometheus.io/port: \"9500\""));
  // The job file travels verbatim.
  const YAML::Node& cm = r.Kind("ConfigMap");
  CHECK(Str(cm["data"]["job.yaml"]) ==
        testing::JobYaml([] {
          testing::JobOptions o;
          o.servers = {"10.0.0.1:47400", "10.0.0.2:47400", "10.0.0.3:47400"};
          return o;
        }()) +
            "metrics:\n  port: 9500\n");
  const YAML::Node& pdb = r.Kind("PodDisruptionBudget");
  CHECK(pdb["spec"]["minAvailable"].as<int>() == 3);
  CHECK(Str(pdb["spec"]["selector"]["matchLabels"]
               ["app.kubernetes.io/component"]) == "server");
}

TEST_CASE("k8s: workers are an Indexed Job that reaches every server by DNS",
          "[k8s]") {
  const Rendered r = Render("worker:\n  device: cuda\n  threads: 2\n");
  const YAML::Node& job = r.Kind("Job");
  CHECK(Str(job["spec"]["completionMode"]) == "Indexed");
  CHECK(job["spec"]["completions"].as<int>() == 2);
  CHECK(job["spec"]["parallelism"].as<int>() == 2);
  CHECK(Str(job["spec"]["template"]["spec"]["restartPolicy"]) == "OnFailure");
  const YAML::Node c = job["spec"]["template"]["spec"]["containers"][0];
  const std::string command = Str(c["command"][2]);
  CHECK(absl::StrContains(command, "--rank \"$JOB_COMPLETION_INDEX\""));
  const std::string name = Str(r.Kind("StatefulSet")["metadata"]["name"]);
  const std::string service = Str(r.Kind("Service")["metadata"]["name"]);
  for (int k = 0; k < 3; ++k) {
    CHECK(absl::StrContains(command,
                            absl::StrCat(name, "-", k, ".", service,
                                         ".ml.svc.cluster.local:47400")));
  }
  CHECK(c["resources"]["limits"]["nvidia.com/gpu"].as<int>() == 1);
  CHECK(Str(c["resources"]["requests"]["cpu"]) == "2");
  CHECK(Str(c["volumeMounts"][0]["mountPath"]) == "/etc/paramd");
}

TEST_CASE(
    "k8s: worker.command runs a framework's worker with the job's "
    "servers",
    "[k8s]") {
  const Rendered r =
      Render("worker:\n  command: [\"/usr/bin/python3\", \"train.py\"]\n");
  const YAML::Node c =
      r.Kind("Job")["spec"]["template"]["spec"]["containers"][0];
  const std::string command = Str(c["command"][2]);
  CHECK(absl::StartsWith(command,
                         "PARAMD_JOB=/etc/paramd/job.yaml "
                         "PARAMD_SERVERS="));
  CHECK(absl::EndsWith(command, " exec '/usr/bin/python3' 'train.py'"));
  CHECK_FALSE(absl::StrContains(command, "paramd-worker"));
  CHECK_FALSE(absl::StrContains(command, "PARAMD_BACKUPS"));
  // With replicas it is told the backups too.
  const Rendered replicated = Render(
      "worker:\n  command: [\"/usr/bin/python3\", \"train.py\"]\n"
      "replication:\n  factor: 2\n  backups: [\"10.0.1.1:47400\", "
      "\"10.0.1.2:47400\", \"10.0.1.3:47400\"]\n");
  CHECK(absl::StrContains(
      Str(replicated.Kind(
          "Job")["spec"]["template"]["spec"]["containers"][0]["command"][2]),
      " PARAMD_BACKUPS=paramd-test-job-backup-0.paramd-test-job-backups.ml."
      "svc.cluster.local:47400,"));
}

TEST_CASE(
    "k8s: with replicas the backups are a StatefulSet of their own, each "
    "pod told its peer, and workers reach both",
    "[k8s][replication]") {
  const Rendered r = Render(
      "replication:\n  factor: 2\n  backups: [\"10.0.1.1:47400\", "
      "\"10.0.1.2:47400\", \"10.0.1.3:47400\"]\n");
  std::vector<std::string> kinds;
  for (const YAML::Node& d : r.docs) kinds.push_back(Str(d["kind"]));
  // The job's etcd (its own: the job names none) comes first.
  CHECK(kinds == std::vector<std::string>{
                     "ConfigMap", "Service", "StatefulSet", "Service",
                     "Service", "StatefulSet", "StatefulSet", "Job",
                     "PodDisruptionBudget", "PodDisruptionBudget"});
  const YAML::Node& servers = r.docs[5];
  const YAML::Node& backups = r.docs[6];
  CHECK(Str(servers["metadata"]["name"]) == "paramd-test-job-server");
  CHECK(Str(backups["metadata"]["name"]) == "paramd-test-job-backup");
  CHECK(Str(backups["spec"]["serviceName"]) ==
        Str(r.docs[4]["metadata"]["name"]));
  CHECK(backups["spec"]["replicas"].as<int>() == 3);
  // The two sets' pods do not overlap.
  CHECK(Str(servers["spec"]["selector"]["matchLabels"]
                   ["app.kubernetes.io/component"]) == "server");
  CHECK(Str(backups["spec"]["selector"]["matchLabels"]
                   ["app.kubernetes.io/component"]) == "backup");
  auto command = [](const YAML::Node& sts) {
    return Str(sts["spec"]["template"]["spec"]["containers"][0]["command"][2]);
  };
  CHECK(absl::StrContains(
      command(servers),
      " --peer "
      "paramd-test-job-backup-${HOSTNAME##*-}.paramd-test-job-backups.ml.svc."
      "cluster.local:47400"));
  CHECK_FALSE(absl::StrContains(command(servers), "--backup "));
  CHECK(absl::StrContains(
      command(backups),
      " --backup --peer paramd-test-job-server-${HOSTNAME##*-}.paramd-test-job-"
      "servers.ml.svc.cluster.local:47400"));
  const std::string worker = Str(
      r.Kind("Job")["spec"]["template"]["spec"]["containers"][0]["command"][2]);
  CHECK(absl::StrContains(
      worker,
      "--backups "
      "paramd-test-job-backup-0.paramd-test-job-backups.ml.svc.cluster."
      "local:47400,paramd-test-job-backup-1.paramd-test-job-backups.ml.svc."
      "cluster."
      "local:47400,paramd-test-job-backup-2."));
  CHECK(Str(r.docs[9]["spec"]["selector"]["matchLabels"]
                  ["app.kubernetes.io/component"]) == "backup");
  // Each set keeps off the other's nodes where it can.
  for (const auto& [sts, peer] :
       {std::pair{servers, "backup"}, std::pair{backups, "server"}}) {
    const YAML::Node term =
        sts["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
           ["preferredDuringSchedulingIgnoredDuringExecution"][0];
    CHECK(Str(term["podAffinityTerm"]["topologyKey"]) ==
          "kubernetes.io/hostname");
    CHECK(Str(term["podAffinityTerm"]["labelSelector"]["matchLabels"]
                  ["app.kubernetes.io/component"]) == peer);
    CHECK(Str(term["podAffinityTerm"]["labelSelector"]["matchLabels"]
                  ["app.kubernetes.io/instance"]) == "paramd-test-job");
  }
}

TEST_CASE(
    "k8s: replicas without coordination.etcd get an etcd of the job's own, "
    "which every server and worker is given and waits for",
    "[k8s][replication][coordination]") {
  const std::string replicas =
      "replication:\n  factor: 2\n  backups: [\"10.0.1.1:47400\", "
      "\"10.0.1.2:47400\", \"10.0.1.3:47400\"]\n";
  const Rendered r = Render(replicas);
  const std::string endpoint = "paramd-test-job-etcd.ml.svc.cluster.local:2379";
  const YAML::Node& svc = r.docs[1];
  const YAML::Node& etcd = r.docs[2];
  CHECK(Str(svc["metadata"]["name"]) == "paramd-test-job-etcd");
  CHECK(svc["spec"]["ports"][0]["port"].as<int>() == 2379);
  CHECK(Str(svc["spec"]["selector"]["app.kubernetes.io/component"]) == "etcd");
  CHECK(Str(etcd["metadata"]["name"]) == "paramd-test-job-etcd");
  CHECK(etcd["spec"]["replicas"].as<int>() == 1);
  CHECK(Str(etcd["spec"]["selector"]["matchLabels"]
                ["app.kubernetes.io/component"]) == "etcd");
  const YAML::Node container =
      etcd["spec"]["template"]["spec"]["containers"][0];
  CHECK(Str(container["image"]) == "registry.example/paramd:1.0");
  std::vector<std::string> words;
  for (const YAML::Node& w : container["command"]) words.push_back(Str(w));
  REQUIRE(!words.empty());
  CHECK(words[0] == "etcd");
  const auto after = [&words](const std::string& flag) {
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      if (words[i] == flag) return words[i + 1];
    }
    return std::string("(none)");
  };
  CHECK(after("--advertise-client-urls") == "http://" + endpoint);
  CHECK(after("--listen-client-urls") == "http://0.0.0.0:2379");
  CHECK(after("--data-dir") == "/var/lib/etcd/data");
  CHECK(Str(container["readinessProbe"]["httpGet"]["path"]) == "/health");
  CHECK(etcd["spec"]["template"]["spec"]["volumes"][0]["emptyDir"].IsMap());
  // Servers, backups and workers are given it and wait for it.
  int given = 0;
  for (const YAML::Node& d : r.docs) {
    const std::string kind = Str(d["kind"]);
    const std::string name = Str(d["metadata"]["name"]);
    if ((kind != "StatefulSet" && kind != "Job") ||
        name == "paramd-test-job-etcd") {
      continue;
    }
    INFO(name);
    const YAML::Node spec = d["spec"]["template"]["spec"];
    CHECK(absl::StrContains(Str(spec["containers"][0]["command"][2]),
                            " --etcd " + endpoint));
    REQUIRE(spec["initContainers"].IsSequence());
    CHECK(Str(spec["initContainers"][0]["name"]) == "await-etcd");
    CHECK(absl::StrContains(Str(spec["initContainers"][0]["command"][2]),
                            "etcdctl --endpoints=" + endpoint));
    ++given;
  }
  CHECK(given == 3);
  // A job that names its etcd uses it: nothing of the above.
  const Rendered named =
      Render(replicas + "coordination:\n  etcd: [\"etcd.infra:2379\"]\n");
  CHECK_FALSE(absl::StrContains(named.text, "-etcd"));
  CHECK_FALSE(absl::StrContains(named.text, "--etcd"));
  CHECK_FALSE(absl::StrContains(named.text, "initContainers"));
  // Nor does a job without replicas.
  CHECK_FALSE(absl::StrContains(Render("").text, "etcd"));
}

TEST_CASE("k8s: checkpoints get a volume per server", "[k8s]") {
  Rendered r = Render("checkpoint:\n  dir: ck\n  keep: 2\n");
  const YAML::Node& sts = r.Kind("StatefulSet");
  REQUIRE(sts["spec"]["volumeClaimTemplates"].size() == 1);
  CHECK(Str(sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]) ==
        "checkpoints");
  const YAML::Node c = sts["spec"]["template"]["spec"]["containers"][0];
  CHECK(absl::StrContains(Str(c["command"][2]),
                          "--checkpoint_dir /var/lib/paramd/checkpoints"));
  CHECK(Str(c["volumeMounts"][1]["mountPath"]) ==
        "/var/lib/paramd/checkpoints");
  r = Render("");
  CHECK_FALSE(r.Kind("StatefulSet")["spec"]["volumeClaimTemplates"]);
}

TEST_CASE("k8s: names, namespaces and what cannot be rendered", "[k8s]") {
  CHECK(*K8sName("Fashion_MNIST mlp") == "paramd-fashion-mnist-mlp");
  CHECK(*K8sName("--x--") == "paramd-x");
  CHECK(K8sName(std::string(100, 'a'))->size() <= 47);
  CHECK_FALSE(K8sName("___").ok());
  JobConfig config;
  config.job_id = "j";
  config.servers = {"h:1"};
  config.num_workers = 1;
  K8sOptions o;
  o.namespace_name = "Bad_NS";
  absl::StatusOr<std::string> text = K8sManifests(config, o);
  REQUIRE_FALSE(text.ok());
  CHECK(absl::StrContains(text.status().message(), "--namespace"));
  o.namespace_name = "ok";
  o.image = "has space";
  CHECK_FALSE(K8sManifests(config, o).ok());
  o.image = "paramd:latest";
  config.security.token_file = "/secrets/token";
  text = K8sManifests(config, o);
  REQUIRE_FALSE(text.ok());
  CHECK(absl::StrContains(text.status().message(), "security"));
  config.security.token_file.clear();
  config.model.type = ModelType::kTensors;
  config.model.tensors_file = "/jobs/model.tensors.yaml";
  text = K8sManifests(config, o);
  REQUIRE_FALSE(text.ok());
  CHECK(absl::StrContains(text.status().message(),
                          "model.tensors_file: '/jobs/model.tensors.yaml' "
                          "would not be in the pods"));
}

}  // namespace
}  // namespace paramd
