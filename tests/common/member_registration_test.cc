// MemberRegistration (common/coord/rpc/member_registration.h) against a real
// etcd: the key and its lease while registered, the key gone at once when
// the registration ends, and a lease lost under it (revoked by another
// client, as etcd does to a lease it stopped hearing about) taken again
// with the key written again; ListJobMembers reads what is registered.
#include "common/coord/rpc/member_registration.h"

#include <catch2/catch.hpp>

#include "absl/time/clock.h"
#include "tests/local_etcd.h"
#include "tests/skip_main.h"
#include "tests/test_files.h"
#include "tools/ctl/local_secrets.h"

namespace paramd {
namespace testing {

std::string SkipReason() { return MissingPrograms({"etcd"}); }

namespace {

JobConfig Coordinated(const std::string& endpoint) {
  return CoordinatedConfig(endpoint, "reg-job");
}

TEST_CASE("a member's key lives with its registration and comes back",
          "[coord][members]") {
  LocalEtcd etcd;
  const JobConfig config = Coordinated(etcd.endpoint());
  auto client = EtcdClient::Connect({etcd.endpoint()});
  REQUIRE(client.ok());
  auto watch = (*client)->Watch(MembersPrefix("reg-job"), 0);
  REQUIRE(watch.ok());
  std::vector<EtcdEvent> pending;

  auto reg = MemberRegistration::Start(
      config, JobMember{"server", 1, "10.0.0.2:47321", "node-a", 99});
  REQUIRE(reg.ok());
  CHECK((*reg)->key() == "/paramd/reg-job/members/server/1");
  EtcdEvent e = NextEvent(watch->get(), &pending);
  CHECK(e.type == EtcdEvent::Type::kPut);
  CHECK(e.kv.value == "10.0.0.2:47321 node-a 99");
  CHECK(e.kv.lease == (*reg)->lease());
  auto members = ListJobMembers(config);
  REQUIRE(members.ok());
  REQUIRE(members->size() == 1);
  CHECK((*members)[0].kind == "server");
  CHECK((*members)[0].id == 1);
  CHECK((*members)[0].pid == 99);

  // The lease ends under it: the key goes, and the registration takes a
  // new lease and writes the key again.
  const int64_t first = (*reg)->lease();
  REQUIRE((*client)->Revoke(first).ok());
  e = NextEvent(watch->get(), &pending);
  CHECK(e.type == EtcdEvent::Type::kDelete);
  e = NextEvent(watch->get(), &pending);
  CHECK(e.type == EtcdEvent::Type::kPut);
  CHECK(e.kv.key == "/paramd/reg-job/members/server/1");
  CHECK(e.kv.lease != first);

  // Ended: its lease is revoked and the key gone at once.
  const int64_t second = e.kv.lease;
  reg->reset();
  e = NextEvent(watch->get(), &pending);
  CHECK(e.type == EtcdEvent::Type::kDelete);
  CHECK((*client)->KeepAlive(second).status().code() ==
        absl::StatusCode::kNotFound);
  members = ListJobMembers(config);
  REQUIRE(members.ok());
  CHECK(members->empty());
}

TEST_CASE("a key under the prefix that is not a member is named",
          "[coord][members]") {
  LocalEtcd etcd;
  const JobConfig config = Coordinated(etcd.endpoint());
  auto client = EtcdClient::Connect({etcd.endpoint()});
  REQUIRE(client.ok());
  REQUIRE((*client)->Put("/paramd/reg-job/members/chief/0", "x y 1").ok());
  auto members = ListJobMembers(config);
  REQUIRE_FALSE(members.ok());
  CHECK_THAT(std::string(members.status().message()),
             Catch::Contains("/paramd/reg-job/members/chief/0"));
}

TEST_CASE(
    "over TLS to etcd, with a client certificate, members register and are "
    "listed; plain text, no client certificate or no CA file are refused",
    "[coord][members][tls]") {
  const std::string dir = NewTempDir();
  JobConfig secrets;
  secrets.job_id = "tls-job";
  secrets.security.tls_cert = dir + "/etcd.crt";
  secrets.security.tls_key = dir + "/etcd.key";
  secrets.security.tls_ca = secrets.security.tls_cert;
  auto made = MakeLocalSecrets(secrets);
  INFO(made.status().ToString());
  REQUIRE(made.ok());
  const LocalEtcd::Tls tls{secrets.security.tls_cert, secrets.security.tls_key,
                           /*client_auth=*/true};
  LocalEtcd etcd(&tls);
  JobConfig config = CoordinatedConfig(etcd.endpoint(), "tls-job");
  config.coordination.tls_ca = tls.cert;
  config.coordination.tls_cert = tls.cert;
  config.coordination.tls_key = tls.key;

  auto reg = MemberRegistration::Start(
      config, JobMember{"server", 0, "10.0.0.1:5000", "node-a", 7});
  INFO(reg.status().ToString());
  REQUIRE(reg.ok());
  auto members = ListJobMembers(config);
  INFO(members.status().ToString());
  REQUIRE(members.ok());
  REQUIRE(members->size() == 1);
  CHECK((*members)[0].address == "10.0.0.1:5000");

  JobConfig no_client_cert = config;
  no_client_cert.coordination.tls_cert.clear();
  no_client_cert.coordination.tls_key.clear();
  CHECK_FALSE(ListJobMembers(no_client_cert).ok());
  JobConfig plain = no_client_cert;
  plain.coordination.tls_ca.clear();
  CHECK_FALSE(ListJobMembers(plain).ok());
  JobConfig no_ca = config;
  no_ca.coordination.tls_ca = dir + "/nothing.pem";
  const absl::Status s = ListJobMembers(no_ca).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(s.message()) ==
        "coordination.tls_ca: cannot read " + dir + "/nothing.pem");
}

}  // namespace
}  // namespace testing
}  // namespace paramd
