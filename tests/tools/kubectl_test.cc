// kubectl reads paramctl k8s's manifests: `kubectl create --dry-run=client
// -f` against a stub that answers only API discovery (no cluster exists
// here), so kubectl maps every object's apiVersion and kind to a resource
// and decodes it. Schema validation needs a real API server's OpenAPI
// documents, so it runs with --validate=false; k8s_manifests_test checks
// the fields. Skips, saying so, without kubectl.
#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/http_stub.h"
#include "tests/skip_main.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd {
namespace testing {

std::string SkipReason() { return MissingPrograms({"kubectl"}); }

namespace {

HttpResponse Json(std::string body) {
  return HttpResponse{200, "application/json", std::move(body)};
}

std::string ResourceList(const std::string& group_version,
                         const std::string& name, const std::string& kind) {
  return absl::StrCat(
      R"({"kind":"APIResourceList","apiVersion":"v1","groupVersion":")",
      group_version, R"(","resources":[{"name":")", name,
      R"(","singularName":"","namespaced":true,"kind":")", kind,
      R"(","verbs":["create","get","list"]}]})");
}

// Discovery for the five kinds paramctl k8s writes, nothing else.
std::unique_ptr<HttpStub> DiscoveryStub() {
  std::map<std::string, HttpHandler> h;
  h["/api"] = [] {
    return Json(R"({"kind":"APIVersions","versions":["v1"],)"
                R"("serverAddressByClientCIDRs":[]})");
  };
  h["/apis"] = [] {
    std::string groups;
    for (const char* g : {"apps", "batch", "policy"}) {
      absl::StrAppend(&groups, groups.empty() ? "" : ",", R"({"name":")", g,
                      R"(","versions":[{"groupVersion":")", g,
                      R"(/v1","version":"v1"}],"preferredVersion":)",
                      R"({"groupVersion":")", g, R"(/v1","version":"v1"}})");
    }
    return Json(
        absl::StrCat(R"({"kind":"APIGroupList","apiVersion":"v1","groups":[)",
                     groups, "]}"));
  };
  h["/api/v1"] = [] {
    return Json(R"({"kind":"APIResourceList","groupVersion":"v1","resources":[)"
                R"({"name":"configmaps","singularName":"","namespaced":true,)"
                R"("kind":"ConfigMap","verbs":["create"]},)"
                R"({"name":"services","singularName":"","namespaced":true,)"
                R"("kind":"Service","verbs":["create"]}]})");
  };
  h["/apis/apps/v1"] = [] {
    return Json(ResourceList("apps/v1", "statefulsets", "StatefulSet"));
  };
  h["/apis/batch/v1"] = [] {
    return Json(ResourceList("batch/v1", "jobs", "Job"));
  };
  h["/apis/policy/v1"] = [] {
    return Json(ResourceList("policy/v1", "poddisruptionbudgets",
                             "PodDisruptionBudget"));
  };
  absl::StatusOr<std::unique_ptr<HttpStub>> server =
      HttpStub::Start(std::move(h));
  REQUIRE(server.ok());
  return *std::move(server);
}

// kubectl create --dry-run=client on `manifests`; exit code and output.
std::pair<int, std::string> DryRun(const std::string& dir, int port,
                                   const std::string& manifests) {
  Subprocess kubectl(
      {FindProgram("kubectl"), "create", "--dry-run=client", "--validate=false",
       absl::StrCat("--server=http://127.0.0.1:", port),
       "--cache-dir=" + dir + "/kube-cache", "-f", manifests, "-o", "name"});
  const int rc = kubectl.Wait(absl::Minutes(2));
  return {rc, kubectl.output()};
}

TEST_CASE("kubectl create --dry-run=client accepts the rendered manifests",
          "[k8s][kubectl]") {
  const std::string dir = NewTempDir();
  JobOptions o;
  o.servers = {"127.0.0.1:47310", "127.0.0.1:47311"};
  const std::string job = WriteFile(
      dir + "/job.yaml",
      JobYaml(o) + "checkpoint:\n  dir: ck\nworker:\n  device: cuda\n");
  Subprocess paramctl({"tools/paramctl", "k8s", job, "--namespace", "train",
                       "--output", dir + "/manifests.yaml"});
  REQUIRE(paramctl.Wait(absl::Minutes(1)) == 0);
  std::unique_ptr<HttpStub> stub = DiscoveryStub();
  auto [rc, out] = DryRun(dir, stub->port(), dir + "/manifests.yaml");
  INFO(out);
  CHECK(rc == 0);
  for (const char* object :
       {"configmap/paramd-test-job-job", "service/paramd-test-job-servers",
        "statefulset.apps/paramd-test-job-server",
        "job.batch/paramd-test-job-worker",
        "poddisruptionbudget.policy/paramd-test-job-servers"}) {
    CHECK(absl::StrContains(out, object));
  }
}

TEST_CASE("the stub is no rubber stamp: kubectl refuses an unknown kind",
          "[k8s][kubectl]") {
  const std::string dir = NewTempDir();
  const std::string bad = WriteFile(
      dir + "/bad.yaml",
      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n");
  std::unique_ptr<HttpStub> stub = DiscoveryStub();
  auto [rc, out] = DryRun(dir, stub->port(), bad);
  INFO(out);
  CHECK(rc != 0);
  CHECK(absl::StrContains(out, "Deployment"));
}

}  // namespace
}  // namespace testing
}  // namespace paramd
