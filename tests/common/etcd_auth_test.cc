// etcd's authentication through EtcdClient (Options::user) and through a
// job's coordination section (coordination.user, password_file): a real
// etcd with `auth enable` (turned on here through its own Auth API), whose
// calls without a valid token are refused.
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config/job_file.h"
#include "common/coord/rpc/coordinator.h"
#include "common/coord/rpc/etcd_client.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "tests/local_etcd.h"
#include "tests/skip_main.h"
#include "tests/test_files.h"

namespace paramd {
namespace testing {

std::string SkipReason() { return MissingPrograms({"etcd"}); }

namespace {

namespace pb = etcdserverpb;

constexpr char kPassword[] = "s3cret pass";

// Adds user root (kPassword, role root) to the etcd at `endpoint` and
// turns authentication on, as `etcdctl user add root; etcdctl auth enable`.
void EnableAuth(const std::string& endpoint) {
  auto channel =
      grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  auto auth = pb::Auth::NewStub(channel);
  auto call = [](auto&& rpc) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    const grpc::Status s = rpc(&context);
    INFO(s.error_message());
    REQUIRE(s.ok());
  };
  pb::AuthUserAddRequest add;
  add.set_name("root");
  add.set_password(kPassword);
  pb::AuthUserAddResponse added;
  call([&](grpc::ClientContext* c) { return auth->UserAdd(c, add, &added); });
  pb::AuthUserGrantRoleRequest grant;
  grant.set_user("root");
  grant.set_role("root");
  pb::AuthUserGrantRoleResponse granted;
  call([&](grpc::ClientContext* c) {
    return auth->UserGrantRole(c, grant, &granted);
  });
  pb::AuthEnableRequest enable;
  pb::AuthEnableResponse enabled;
  call([&](grpc::ClientContext* c) {
    return auth->AuthEnable(c, enable, &enabled);
  });
}

std::unique_ptr<EtcdClient> Client(const std::string& endpoint,
                                   const std::string& user,
                                   const std::string& password) {
  EtcdClient::Options options;
  options.timeout = absl::Seconds(10);
  options.user = user;
  options.password = password;
  auto client = EtcdClient::Connect({endpoint}, options);
  REQUIRE(client.ok());
  return std::move(*client);
}

TEST_CASE(
    "with etcd's authentication on, a client with the user's password "
    "reads, writes, leases and watches; without it every call is refused",
    "[coord][etcd][auth]") {
  LocalEtcd etcd;
  EnableAuth(etcd.endpoint());

  std::unique_ptr<EtcdClient> root = Client(etcd.endpoint(), "root", kPassword);
  REQUIRE(root->Put("/paramd/a", "1").ok());
  absl::StatusOr<std::optional<EtcdKeyValue>> got = root->Get("/paramd/a");
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK((*got)->value == "1");
  absl::Duration granted;
  absl::StatusOr<int64_t> lease = root->Grant(absl::Seconds(5), &granted);
  REQUIRE(lease.ok());
  CHECK(root->KeepAlive(*lease).ok());
  absl::StatusOr<std::unique_ptr<EtcdWatch>> watch = root->Watch("/paramd/", 0);
  INFO(watch.status().ToString());
  REQUIRE(watch.ok());
  REQUIRE(root->Put("/paramd/b", "2", *lease).ok());
  std::vector<EtcdEvent> pending;
  const EtcdEvent event = NextEvent(watch->get(), &pending);
  CHECK(event.kv.key == "/paramd/b");
  CHECK(root->Revoke(*lease).ok());

  // No user: etcd refuses, and the error names the call.
  std::unique_ptr<EtcdClient> anonymous = Client(etcd.endpoint(), "", "");
  absl::StatusOr<std::optional<EtcdKeyValue>> refused =
      anonymous->Get("/paramd/a");
  REQUIRE_FALSE(refused.ok());
  CHECK(absl::StrContains(refused.status().message(), "Range"));
  // A wrong password: the error names the user.
  std::unique_ptr<EtcdClient> wrong = Client(etcd.endpoint(), "root", "nope");
  absl::StatusOr<int64_t> put = wrong->Put("/paramd/c", "3");
  REQUIRE_FALSE(put.ok());
  CHECK(
      absl::StrContains(put.status().message(), "Authenticate as user 'root'"));
}

TEST_CASE(
    "coordination.user and password_file: the job's processes call etcd as "
    "that user; the two come together and the file must hold a password",
    "[coord][etcd][auth][config]") {
  LocalEtcd etcd;
  EnableAuth(etcd.endpoint());
  const std::string dir = NewTempDir();
  WriteFile(dir + "/etcd-password", absl::StrCat(kPassword, "\n"));
  WriteFile(dir + "/empty", "");
  JobOptions o;
  const std::string base =
      JobYaml(o) + "coordination:\n  etcd: [\"" + etcd.endpoint() + "\"]\n";
  absl::StatusOr<JobConfig> config = LoadJobConfig(
      WriteFile(dir + "/job.yaml",
                base + "  user: root\n  password_file: etcd-password\n"));
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  CHECK(config->coordination.password_file == dir + "/etcd-password");
  absl::StatusOr<std::unique_ptr<EtcdClient>> client =
      ConnectCoordinator(config->coordination);
  REQUIRE(client.ok());
  CHECK((*client)->Put("/paramd/job", "x").ok());

  // An empty password file: refused when connecting, naming the field.
  config->coordination.password_file = dir + "/empty";
  client = ConnectCoordinator(config->coordination);
  REQUIRE_FALSE(client.ok());
  CHECK(absl::StrContains(client.status().message(),
                          "coordination.password_file"));
  // One without the other: refused when loading, naming the missing one.
  std::string path;
  CHECK(absl::StrContains(JobYamlError(base + "  user: root\n", &path),
                          "coordination.password_file: missing"));
  CHECK(absl::StrContains(
      JobYamlError(base + "  password_file: etcd-password\n", &path),
      "coordination.user: missing"));
}

}  // namespace
}  // namespace testing
}  // namespace paramd
