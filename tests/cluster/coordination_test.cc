// A job with coordination.etcd, with the real binaries and a real etcd
// (tests/local_etcd.h): a server registers once it listens and a worker
// while it trains, each under the job's prefix with its address; paramctl
// status lists them from etcd; a worker that finishes and a server stopped
// by SIGTERM revoke their lease (their keys go at once); a SIGKILLed server's
// key goes when its lease runs out. A replicated job fenced by etcd: its
// primaries hold their shards at the claims' terms, and one SIGKILLed at a
// random step is replaced (by its restart, or by its backup once its lease
// ended) with the job ending as undisturbed — also when the job names no
// coordinator and paramctl run starts an etcd of its own. Skips where etcd
// is not installed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/coord/rpc/etcd_client.h"
#include "common/coord/rpc/etcd_shard_fence.h"
#include "tests/disturbed_runs.h"
#include "tests/local_etcd.h"
#include "tests/skip_main.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd::testing {

std::string SkipReason() { return MissingPrograms({"etcd"}); }

namespace {

constexpr absl::Duration kTimeout = absl::Seconds(90);
const char kPrefix[] = "/paramd/test-job/members/";

// A job file of one server and one worker (an epoch of 256 samples)
// coordinated by the etcd at `endpoint`, with leases of 2 s.
std::string CoordinatedJob(const std::string& endpoint) {
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = 1;
  o.epochs = 1;
  o.train_limit = 256;
  o.test_limit = 64;
  return WriteFile(NewTempDir() + "/job.yaml",
                   JobYaml(o) + "coordination:\n  etcd: [\"" + endpoint +
                       "\"]\n  lease_seconds: 2\n");
}

// A client of the etcd at `endpoint` watching the job's members from now,
// and the events read and not yet taken.
struct MembersWatch {
  explicit MembersWatch(const std::string& endpoint) {
    auto made = EtcdClient::Connect({endpoint});
    REQUIRE(made.ok());
    client = std::move(*made);
    auto w = client->Watch(kPrefix, 0);
    REQUIRE(w.ok());
    watch = std::move(*w);
  }
  EtcdEvent Next() { return NextEvent(watch.get(), &pending, kTimeout); }

  std::unique_ptr<EtcdClient> client;
  std::unique_ptr<EtcdWatch> watch;
  std::vector<EtcdEvent> pending;
};

TEST_CASE("servers and workers register in etcd, and go when they stop",
          "[coord][e2e]") {
  LocalEtcd etcd;
  const std::string job = CoordinatedJob(etcd.endpoint());
  MembersWatch members(etcd.endpoint());

  std::string address;
  std::unique_ptr<Subprocess> server = StartServer(job, &address, {}, kTimeout);
  EtcdEvent e = members.Next();
  CHECK(e.type == EtcdEvent::Type::kPut);
  CHECK(e.kv.key == std::string(kPrefix) + "server/0");
  CHECK(absl::StartsWith(e.kv.value, address + " "));
  CHECK(absl::EndsWith(e.kv.value, " " + std::to_string(server->pid())));
  const int64_t server_lease = e.kv.lease;
  CHECK(server_lease != 0);

  std::string said;
  REQUIRE(RunCommand(
              {"tools/paramctl", "status", "--job", job, "--servers", address},
              &said, kTimeout) == 0);
  INFO(said);
  CHECK(said.find("MEMBERS (coordination.etcd)") != std::string::npos);
  CHECK(said.find(address) != std::string::npos);

  // A worker is a member while it trains; done, it revokes its lease.
  std::unique_ptr<Subprocess> worker = StartWorker(job, 0, address);
  e = members.Next();
  CHECK(e.type == EtcdEvent::Type::kPut);
  CHECK(e.kv.key == std::string(kPrefix) + "worker/0");
  CHECK(absl::StartsWith(e.kv.value, "- "));
  const int64_t worker_lease = e.kv.lease;
  REQUIRE(worker->Wait(kTimeout) == 0);
  e = members.Next();
  CHECK(e.type == EtcdEvent::Type::kDelete);
  CHECK(e.kv.key == std::string(kPrefix) + "worker/0");
  CHECK(members.client->KeepAlive(worker_lease).status().code() ==
        absl::StatusCode::kNotFound);  // Revoked, not run out.

  // SIGTERM: the server revokes its lease as it stops.
  server->Signal(SIGTERM);
  REQUIRE(server->Wait(kTimeout) == 0);
  e = members.Next();
  CHECK(e.type == EtcdEvent::Type::kDelete);
  CHECK(e.kv.key == std::string(kPrefix) + "server/0");
  CHECK(members.client->KeepAlive(server_lease).status().code() ==
        absl::StatusCode::kNotFound);

  // SIGKILL: nothing revokes; the key goes when the lease runs out.
  server = StartServer(job, &address, {}, kTimeout);
  e = members.Next();
  REQUIRE(e.type == EtcdEvent::Type::kPut);
  CHECK(e.kv.key == std::string(kPrefix) + "server/0");
  server->Signal(SIGKILL);
  REQUIRE(ProcessGone(server->pid()));
  e = members.Next();
  CHECK(e.type == EtcdEvent::Type::kDelete);
  CHECK(e.kv.key == std::string(kPrefix) + "server/0");
  auto listed = members.client->List(kPrefix);
  REQUIRE(listed.ok());
  CHECK(listed->kvs.empty());
}

TEST_CASE("a server listening on every interface registers its host's name",
          "[coord][e2e]") {
  LocalEtcd etcd;
  const std::string job = CoordinatedJob(etcd.endpoint());
  MembersWatch members(etcd.endpoint());
  Subprocess server({"server/paramd-server", "--job", job, "--shard", "0",
                     "--listen", "0.0.0.0:0"});
  const EtcdEvent e = members.Next();
  REQUIRE(e.type == EtcdEvent::Type::kPut);
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof(host) - 1) == 0);
  // "HOST:PORT HOST PID", the port the one it bound.
  CHECK(absl::StartsWith(e.kv.value, std::string(host) + ":"));
  CHECK_FALSE(absl::StartsWith(e.kv.value, "0.0.0.0:"));
  CHECK(e.kv.value.find(" " + std::string(host) + " ") != std::string::npos);
}

TEST_CASE("a server whose etcd cannot be reached says so and exits",
          "[coord][e2e]") {
  LocalEtcd etcd;
  const std::string job = CoordinatedJob(etcd.DeadEndpoint());
  Subprocess server({"server/paramd-server", "--job", job, "--shard", "0"});
  CHECK(server.Wait(kTimeout) == 1);
  INFO(server.output());
  CHECK(server.output().find("coordination.etcd [" + etcd.DeadEndpoint() +
                             "]: could not register "
                             "/paramd/test-job/members/server/0") !=
        std::string::npos);
}

// A sync job of two replicated shards fenced by the etcd at `endpoint`
// (none: paramctl run's own), as tests/cluster/replica_process_test.cc's:
// 3 epochs of 32 steps, rank 1 slowed, no checkpoint.
std::string FencedJob(const std::string& endpoint) {
  JobOptions o;
  o.policy = "sync";
  o.epochs = 3;
  o.train_limit = 2048;
  o.test_limit = 500;
  o.lease_seconds = 4;
  return WriteFile(
      NewTempDir() + "/job.yaml",
      JobYaml(o) +
          "replication:\n  factor: 2\n"
          "  backups: [\"127.0.0.1:0\", \"127.0.0.1:0\"]\n"
          "checkpoint:\n  enabled: false\n"
          "restart:\n  max: 3\n  backoff_seconds: 0.2\n"
          "testing:\n  slow_rank: 1\n  slow_step_ms: 25\n" +
          (endpoint.empty() ? std::string()
                            : "coordination:\n  etcd: [\"" + endpoint +
                                  "\"]\n  lease_seconds: 2\n"));
}

TEST_CASE(
    "fenced by etcd, a primary SIGKILLed at a random step loses its shard "
    "to a new claim and the job ends as undisturbed",
    "[coord][fence][e2e]") {
  LocalEtcd etcd;
  const std::string job = FencedJob(etcd.endpoint());
  const std::string calm = Undisturbed(job);
  {
    INFO(calm);
    CHECK(absl::StrContains(calm, "shard 0: holds the shard at term"));
    CHECK(absl::StrContains(calm, "shard 1: holds the shard at term"));
    CHECK(absl::StrContains(calm, "is in sync (it may take over)"));
  }
  const std::vector<std::string> expected = EpochFigures(calm);
  REQUIRE(expected.size() == 3);

  const std::string victim = GENERATE("server 0", "server 1");
  const std::string out = Disturbed(job, victim, SIGKILL, 1);
  INFO(out);
  CHECK(absl::StrContains(out, "killed by signal 9"));
  // The restart claimed the shard once the old lease ended (and took the
  // backup's state), or the backup took it over first.
  CHECK(std::regex_search(
      out, std::regex(R"(took the state of version \d+ from the backup|)"
                      R"(took over from the primary)")));
  CHECK(EpochFigures(out) == expected);
  // Every server stopped and revoked its lease: no shard is held; each
  // shard's last mark stays.
  auto client = EtcdClient::Connect({etcd.endpoint()});
  REQUIRE(client.ok());
  for (int shard = 0; shard < 2; ++shard) {
    auto held = (*client)->Get(EtcdShardFence::PrimaryKey("test-job", shard));
    REQUIRE(held.ok());
    CHECK_FALSE(held->has_value());
    auto mark = (*client)->Get(EtcdShardFence::BackupKey("test-job", shard));
    REQUIRE(mark.ok());
    CHECK(mark->has_value());
  }
}

TEST_CASE(
    "paramctl run fences a replicated job without a coordinator by an etcd "
    "of its own, and a primary SIGKILLed at a random step loses nothing",
    "[coord][fence][e2e]") {
  const std::string job = FencedJob("");
  const std::string calm = Undisturbed(job);
  {
    INFO(calm);
    CHECK(absl::StrContains(calm, "paramctl: started etcd (pid "));
    CHECK(absl::StrContains(calm, "shard 0: holds the shard at term"));
    CHECK(absl::StrContains(calm, "shard 1: holds the shard at term"));
  }
  const std::vector<std::string> expected = EpochFigures(calm);
  REQUIRE(expected.size() == 3);
  const std::string out = Disturbed(job, "server 1", SIGKILL, 1);
  INFO(out);
  CHECK(std::regex_search(
      out, std::regex(R"(took the state of version \d+ from the backup|)"
                      R"(took over from the primary)")));
  CHECK(EpochFigures(out) == expected);
}

// A one-worker job whose two servers are found in etcd (cluster.servers
// {etcd: 2}) at `endpoint`, with `extra` YAML appended; its file in `dir`.
std::string EtcdServersJob(const std::string& dir, const std::string& endpoint,
                           int epochs, int train_limit,
                           const std::string& extra) {
  JobOptions o;
  o.servers = {"127.0.0.1:0", "127.0.0.1:0"};
  o.workers = 1;
  o.epochs = epochs;
  o.train_limit = train_limit;
  o.test_limit = 64;
  std::string yaml = JobYaml(o) + "coordination:\n  etcd: [\"" + endpoint +
                     "\"]\n  lease_seconds: 2\n" + extra;
  const std::string listed = "servers: [\"127.0.0.1:0\", \"127.0.0.1:0\"]";
  REQUIRE(yaml.find(listed) != std::string::npos);
  yaml.replace(yaml.find(listed), listed.size(), "servers: {etcd: 2}");
  return WriteFile(dir + "/job.yaml", yaml);
}

TEST_CASE(
    "servers found in etcd: a job of {etcd: 2} servers trains with workers "
    "given no addresses, and paramctl status finds them",
    "[coord][members][e2e]") {
  LocalEtcd etcd;
  const std::string job = EtcdServersJob(NewTempDir(), etcd.endpoint(),
                                         /*epochs=*/1, /*train_limit=*/256, "");

  // The worker starts first: it waits for the servers to register.
  Subprocess worker({"worker/paramd-worker", "--job", job, "--rank", "0"});
  REQUIRE(worker.ReadUntil("waiting for server(s) 0, 1 to register", kTimeout));
  std::vector<std::unique_ptr<Subprocess>> servers;
  std::vector<std::string> addresses;
  for (int shard = 0; shard < 2; ++shard) {
    servers.push_back(std::make_unique<Subprocess>(std::vector<std::string>{
        "server/paramd-server", "--job", job, "--shard", std::to_string(shard),
        "--listen", "127.0.0.1:0"}));
    REQUIRE(servers.back()->ReadUntil("registered as", kTimeout));
    addresses.push_back(ListeningAddress(*servers.back()));
  }
  std::string said;
  REQUIRE(RunCommand({"tools/paramctl", "status", "--job", job}, &said,
                     kTimeout) == 0);
  {
    INFO(said);
    for (const std::string& a : addresses) {
      CHECK(said.find(a) != std::string::npos);
    }
  }
  const int code = worker.Wait(kTimeout);
  INFO(worker.output());
  CHECK(code == 0);
  CHECK(absl::StrContains(worker.output(), "epoch 1/1"));
  for (auto& s : servers) s->Signal(SIGTERM);
  for (auto& s : servers) CHECK(s->Wait(kTimeout) == 0);
}

// A TCP port on 127.0.0.1 held bound (not listening) while this lives.
class HeldPort {
 public:
  explicit HeldPort(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    const int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~HeldPort() { close(fd_); }
  bool bound() const { return bound_; }

 private:
  const int fd_;
  bool bound_ = false;
};

TEST_CASE(
    "servers found in etcd: a server SIGKILLed and started again at another "
    "address is found there by the running worker, and the job completes",
    "[coord][members][e2e]") {
  LocalEtcd etcd;
  const std::string dir = NewTempDir();
  const std::string job = EtcdServersJob(
      dir, etcd.endpoint(), /*epochs=*/2, /*train_limit=*/2048,
      "checkpoint:\n  dir: " + dir +
          "/checkpoints\n  every_steps: 4\ntesting:\n  slow_rank: 0\n  "
          "slow_step_ms: 10\n");
  auto start_server = [&job](int shard) {
    auto server = std::make_unique<Subprocess>(std::vector<std::string>{
        "server/paramd-server", "--job", job, "--shard", std::to_string(shard),
        "--listen", "127.0.0.1:0"});
    REQUIRE(server->ReadUntil("registered as", kTimeout));
    return server;
  };
  std::vector<std::unique_ptr<Subprocess>> servers;
  for (int shard = 0; shard < 2; ++shard)
    servers.push_back(start_server(shard));
  const std::string old_address = ListeningAddress(*servers[0]);
  Subprocess worker({"worker/paramd-worker", "--job", job, "--rank", "0"});
  REQUIRE(servers[0]->ReadUntil("checkpoint of version", kTimeout));
  servers[0]->Signal(SIGKILL);
  servers[0]->Wait(kTimeout);
  // Its port stays taken: the new server 0 listens at another address, as
  // one started on another host would.
  const HeldPort held(
      std::stoi(old_address.substr(old_address.rfind(':') + 1)));
  REQUIRE(held.bound());
  servers[0] = start_server(0);
  const std::string new_address = ListeningAddress(*servers[0]);
  REQUIRE(new_address != old_address);

  const int code = worker.Wait(kTimeout);
  INFO(worker.output() << "\n--- new server 0:\n" << servers[0]->output());
  CHECK(code == 0);
  CHECK(absl::StrContains(worker.output(),
                          absl::StrCat("shard 0: its server moved from ",
                                       old_address, " to ", new_address)));
  CHECK(absl::StrContains(worker.output(), "epoch 2/2"));
  CHECK(absl::StrContains(servers[0]->output(), "restored version"));
  for (auto& s : servers) s->Signal(SIGTERM);
  for (auto& s : servers) CHECK(s->Wait(kTimeout) == 0);
}

}  // namespace
}  // namespace paramd::testing
