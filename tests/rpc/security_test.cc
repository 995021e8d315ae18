// The job token and TLS over real loopback gRPC: calls without the token,
// with a wrong one, plain text to a TLS server, a client that trusts
// another CA, mutual TLS without a client certificate; and training with
// both on. Certificates are made with openssl at test time
// (tools/ctl/local_secrets, what paramctl run --make-secrets uses).
#include <grpcpp/create_channel.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "common/base/job_token.h"
#include "common/rpc/credentials.h"
#include "proto/paramd.grpc.pb.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"
#include "tools/ctl/local_secrets.h"
#include "worker/rpc/grpc_parameter_client.h"
#include "worker/trainer.h"

namespace paramd {
namespace {

using testing::JobOptions;
using testing::LocalCluster;

// A one-server job in a new folder; `token` and `tls` name files there and
// make them with MakeLocalSecrets.
JobConfig SecureJob(bool token, bool tls, bool mutual = false) {
  const std::string dir = testing::NewTempDir();
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = 1;
  o.layers = "[784, 16, 10]";
  o.epochs = 1;
  o.train_limit = 256;
  o.test_limit = 128;
  JobConfig config = testing::MakeJob(o, dir);
  if (token) config.security.token_file = dir + "/secrets/token";
  if (tls) {
    config.security.tls_cert = dir + "/secrets/server.crt";
    config.security.tls_key = dir + "/secrets/server.key";
    config.security.tls_ca = config.security.tls_cert;
    config.security.mutual_tls = mutual;
    if (mutual) {
      config.security.tls_client_cert = config.security.tls_cert;
      config.security.tls_client_key = config.security.tls_key;
    }
  }
  auto said = MakeLocalSecrets(config);
  INFO(said.status().ToString());
  REQUIRE(said.ok());
  return config;
}

JobSecurity Load(const SecurityConfig& config) {
  auto security = LoadSecurity(config);
  INFO(security.status().ToString());
  REQUIRE(security.ok());
  return *security;
}

grpc::Status GetStatus(const std::shared_ptr<grpc::Channel>& channel,
                       proto::ShardStatus* out) {
  auto stub = proto::StatusService::NewStub(channel);
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return stub->GetStatus(&c, proto::GetStatusRequest(), out);
}

grpc::Status Register(const std::shared_ptr<grpc::Channel>& channel,
                      const JobConfig& config, const PartitionPlan& plan) {
  auto stub = proto::ParameterService::NewStub(channel);
  proto::RegisterRequest r;
  r.set_job_id(config.job_id);
  r.set_rank(0);
  r.set_plan_fingerprint(plan.fingerprint());
  proto::RegisterResponse resp;
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return stub->Register(&c, r, &resp);
}

TEST_CASE("job tokens compare whole, and are read with clear errors",
          "[security]") {
  CHECK(JobTokensEqual("0123456789abcdef", "0123456789abcdef"));
  CHECK_FALSE(JobTokensEqual("0123456789abcdef", "0123456789abcdeF"));
  CHECK_FALSE(JobTokensEqual("0123456789abcdef", "0123456789abcde"));
  CHECK_FALSE(JobTokensEqual("0123456789abcdef", "0123456789abcdef0"));
  CHECK_FALSE(JobTokensEqual("0123456789abcdef", ""));
  CHECK_FALSE(JobTokensEqual("", ""));

  const std::string dir = testing::NewTempDir();
  const std::string secret = "s3cr3t-but-short";
  auto token = ReadJobToken(testing::WriteFile(dir + "/ok", secret + "\n"));
  REQUIRE(token.ok());
  CHECK(*token == secret);
  auto bad = ReadJobToken(testing::WriteFile(dir + "/short", "abc\n"));
  CHECK(absl::IsInvalidArgument(bad.status()));
  CHECK_THAT(std::string(bad.status().message()),
             Catch::Contains("security.token_file: '" + dir +
                             "/short' holds a token of 3 characters"));
  bad = ReadJobToken(
      testing::WriteFile(dir + "/space", "0123456789 abcdef0123\n"));
  CHECK(absl::IsInvalidArgument(bad.status()));
  CHECK_THAT(std::string(bad.status().message()),
             !Catch::Contains("0123456789"));
  bad = ReadJobToken(dir + "/missing");
  CHECK(absl::IsNotFound(bad.status()));
  auto a = GenerateJobToken(), b = GenerateJobToken();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->size() == 64);
  CHECK(*a != *b);
}

TEST_CASE(
    "without the job token every RPC is UNAUTHENTICATED and changes "
    "nothing",
    "[security][integration]") {
  const JobConfig config = SecureJob(/*token=*/true, /*tls=*/false);
  LocalCluster cluster(config);
  const std::string address = cluster.addresses()[0];
  const PartitionPlan& plan = cluster.server(0).shard()->plan();
  const JobSecurity right = Load(config.security);
  JobSecurity none = right;
  none.token.clear();
  JobSecurity wrong = right;
  wrong.token = "not-the-token-of-this-job";

  proto::ShardStatus st;
  grpc::Status s = Register(CreateJobChannel(address, none), config, plan);
  CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK_THAT(s.error_message(), Catch::StartsWith("Register: no job token"));
  s = Register(CreateJobChannel(address, wrong), config, plan);
  CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK_THAT(s.error_message(), Catch::StartsWith("Register: wrong job token"));
  CHECK_THAT(s.error_message(),
             !Catch::Contains(right.token) && !Catch::Contains(wrong.token));
  // The status RPC needs it too.
  s = GetStatus(CreateJobChannel(address, none), &st);
  CHECK(s.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK_THAT(s.error_message(), Catch::StartsWith("GetStatus: no job token"));
  // Every other method, streams included, with a wrong token.
  auto channel = CreateJobChannel(address, wrong);
  auto stub = proto::ParameterService::NewStub(channel);
  for (const char* rpc :
       {"Push", "Pull", "PushPull", "Heartbeat", "ReportEpoch", "PushStream",
        "PullStream", "StepStream"}) {
    grpc::ClientContext c;
    grpc::Status r;
    if (std::string(rpc) == "Push") {
      proto::PushResponse resp;
      r = stub->Push(&c, proto::PushRequest(), &resp);
    } else if (std::string(rpc) == "Pull") {
      proto::PullResponse resp;
      r = stub->Pull(&c, proto::PullRequest(), &resp);
    } else if (std::string(rpc) == "PushPull") {
      proto::PullResponse resp;
      r = stub->PushPull(&c, proto::PushRequest(), &resp);
    } else if (std::string(rpc) == "Heartbeat") {
      proto::HeartbeatResponse resp;
      r = stub->Heartbeat(&c, proto::HeartbeatRequest(), &resp);
    } else if (std::string(rpc) == "ReportEpoch") {
      proto::ReportEpochResponse resp;
      r = stub->ReportEpoch(&c, proto::ReportEpochRequest(), &resp);
    } else if (std::string(rpc) == "PushStream") {
      proto::PushResponse resp;
      auto writer = stub->PushStream(&c, &resp);
      writer->WritesDone();
      r = writer->Finish();
    } else if (std::string(rpc) == "StepStream") {
      auto stream = stub->StepStream(&c);
      stream->WritesDone();
      proto::PullResponse part;
      while (stream->Read(&part)) {
      }
      r = stream->Finish();
    } else {
      auto reader = stub->PullStream(&c, proto::PullRequest());
      proto::PullResponse part;
      while (reader->Read(&part)) {
      }
      r = reader->Finish();
    }
    INFO(rpc << ": " << r.error_message());
    CHECK(r.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK_THAT(r.error_message(),
               Catch::StartsWith(std::string(rpc) + ": wrong job token"));
  }
  // With the token: served, and nothing the refused calls sent counted.
  REQUIRE(GetStatus(CreateJobChannel(address, right), &st).ok());
  CHECK(st.version() == 0);
  CHECK(st.pushes() == 0);
  REQUIRE(st.workers_size() == 1);
  CHECK_FALSE(st.workers(0).registered());
  CHECK(st.workers(0).registrations() == 0);
  CHECK(Register(CreateJobChannel(address, right), config, plan).ok());
}

TEST_CASE("a TLS server refuses plain text and clients that trust another CA",
          "[security][integration]") {
  const JobConfig config = SecureJob(/*token=*/true, /*tls=*/true);
  LocalCluster cluster(config);
  const std::string address = cluster.addresses()[0];
  const JobSecurity security = Load(config.security);
  proto::ShardStatus st;
  REQUIRE(GetStatus(CreateJobChannel(address, security), &st).ok());

  // Plain text to a TLS port: no connection, so no call.
  JobSecurity plain = security;
  plain.tls = false;
  grpc::Status s = GetStatus(CreateJobChannel(address, plain), &st);
  CHECK(s.error_code() == grpc::StatusCode::UNAVAILABLE);

  // A client that trusts another job's self-signed certificate.
  const JobConfig other = SecureJob(/*token=*/false, /*tls=*/true);
  JobSecurity stranger = security;
  stranger.ca = Load(other.security).ca;
  s = GetStatus(CreateJobChannel(address, stranger), &st);
  CHECK(s.error_code() == grpc::StatusCode::UNAVAILABLE);

  // A client expecting another name in the certificate.
  JobSecurity misnamed = security;
  misnamed.server_name = "elsewhere.example";
  s = GetStatus(CreateJobChannel(address, misnamed), &st);
  CHECK(s.error_code() == grpc::StatusCode::UNAVAILABLE);
}

TEST_CASE("mutual TLS refuses a client without a certificate",
          "[security][integration]") {
  const JobConfig config =
      SecureJob(/*token=*/false, /*tls=*/true, /*mutual=*/true);
  LocalCluster cluster(config);
  const std::string address = cluster.addresses()[0];
  const JobSecurity security = Load(config.security);
  proto::ShardStatus st;
  REQUIRE(GetStatus(CreateJobChannel(address, security), &st).ok());
  JobSecurity anonymous = security;
  anonymous.mutual_tls = false;  // Presents no certificate.
  const grpc::Status s = GetStatus(CreateJobChannel(address, anonymous), &st);
  CHECK(s.error_code() == grpc::StatusCode::UNAVAILABLE);
}

TEST_CASE("a worker trains over TLS with the job token",
          "[security][integration]") {
  const JobConfig config = SecureJob(/*token=*/true, /*tls=*/true);
  LocalCluster cluster(config);
  auto trainer =
      Trainer::Create(config, 0, TrainerOptions(),
                      GrpcParameterClientFactory(cluster.addresses()));
  INFO(trainer.status().ToString());
  REQUIRE(trainer.ok());
  const absl::Status s = (*trainer)->Run();
  INFO(s.ToString());
  REQUIRE(s.ok());
  proto::ShardStatus st;
  cluster.server(0).shard()->GetStatus(&st);
  CHECK(st.version() == 256 / 32);  // One epoch of 8 batches.

  // A worker whose token file holds another token fails at registration,
  // naming it.
  JobConfig wrong = config;
  wrong.security.token_file = testing::WriteFile(
      testing::NewTempDir() + "/token", "another-job-token-0123456789\n");
  auto stranger =
      Trainer::Create(wrong, 0, TrainerOptions(),
                      GrpcParameterClientFactory(cluster.addresses()));
  absl::Status r = stranger.ok() ? (*stranger)->Run() : stranger.status();
  CHECK(absl::IsUnauthenticated(r));
  CHECK_THAT(std::string(r.message()), Catch::Contains("wrong job token"));
}

}  // namespace
}  // namespace paramd
