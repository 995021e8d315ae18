// A replicated shard fenced by etcd (coordination.etcd) across simulated
// hosts (scripts/hosts.sh): etcd on host 0, the shard's primary on host 1,
// its backup on host 2, both workers on host 3. Partitions are made by
// cutting the route between two hosts (hosts.sh cut), not by killing:
//   (a) the primary cut off from its backup and from etcd, still reached by
//       the workers: it acknowledges nothing more and gives the shard up;
//       the backup claims it once the primary's lease ended;
//   (b) the primary cut off from the workers only: the backup refuses to
//       take over (the primary holds the shard) until the cut heals; the
//       workers, silent to the primary meanwhile, are dropped and rejoin.
//   (c) one member of a three-member etcd (on hosts 0, 4 and 5) killed:
//       the shard stays where it is;
//   (d) the etcd leader's host cut off from every other host: the others
//       elect a leader; the shard stays, or moves once if a renewal missed
//       its lease meanwhile.
// In each, every acknowledgement both servers wrote down (--ack_log, with
// its term) is checked: no two terms' acknowledgements interleave in time,
// and no term acknowledges a version older than one acknowledged before;
// and in (a), (c) and (d) the sync job ends with the undisturbed run's
// figures, digit for digit: nothing lost, nothing applied twice. Skips where
// hosts cannot be made or etcd is not installed. Also: a job whose servers
// are found in etcd (cluster.servers: {etcd: N}) trains across hosts.
#include <signal.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tests/disturbed_runs.h"
#include "tests/hosts.h"
#include "tests/skip_main.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd::testing {

std::string SkipReason() {
  if (std::string missing = MissingPrograms({"etcd"}); !missing.empty()) {
    return missing;
  }
  return TestHosts::SkipReason();
}

namespace {

constexpr absl::Duration kTimeout = absl::Seconds(180);
constexpr int kEtcd = 0, kPrimary = 1, kBackup = 2, kWorkers = 3;
// Each host has a network of its own: a port fixed there meets nothing.
constexpr int kServerPort = 47500, kEtcdPort = 2379;

// The etcd members' hosts: one member, or three.
const std::vector<int> kOneEtcd = {kEtcd};
const std::vector<int> kThreeEtcd = {kEtcd, 4, 5};

// One shard, replicated and fenced by the etcd members on `etcd`, whose
// leases last `lease_seconds`; sync, 3 epochs of 32 steps; rank 1 takes
// 25 ms a step, so that there is time to cut a link mid-epoch.
std::string Job(const TestHosts& hosts, const std::vector<int>& etcd,
                int lease_seconds) {
  JobOptions o;
  o.servers = {absl::StrCat(hosts.address(kPrimary), ":", kServerPort)};
  o.epochs = 3;
  o.train_limit = 2048;
  o.test_limit = 500;
  o.lease_seconds = 4;
  std::vector<std::string> endpoints;
  for (int k : etcd) {
    endpoints.push_back(
        absl::StrCat("\"", hosts.address(k), ":", kEtcdPort, "\""));
  }
  return WriteFile(
      NewTempDir() + "/job.yaml",
      JobYaml(o) + absl::StrCat("replication:\n  factor: 2\n  backups: [\"",
                                hosts.address(kBackup), ":", kServerPort,
                                "\"]\n"
                                "coordination:\n  etcd: [",
                                absl::StrJoin(endpoints, ", "),
                                "]\n  lease_seconds: ", lease_seconds,
                                "\n"
                                "testing:\n  slow_rank: 1\n  slow_step_ms: "
                                "25\n"));
}

// An etcd cluster, a member on each of its hosts.
struct EtcdCluster {
  std::vector<int> hosts;
  std::vector<std::unique_ptr<Subprocess>> members;

  // The host of the member that is the leader now (each member's log says
  // "became leader" when it does).
  int Leader() const {
    for (size_t i = 0; i < members.size(); ++i) {
      if (absl::StrContains(members[i]->output(), " became leader at term")) {
        return hosts[i];
      }
    }
    FAIL("no etcd member became leader");
    return -1;
  }
};

// The members on `on`, each serving clients once it returns.
EtcdCluster StartEtcd(const TestHosts& hosts, const std::vector<int>& on) {
  auto peer = [&hosts](int k) {
    return absl::StrCat("http://", hosts.address(k), ":", kEtcdPort + 1);
  };
  std::vector<std::string> initial;
  for (int k : on) initial.push_back(absl::StrCat("m", k, "=", peer(k)));
  const std::string dir = NewTempDir();
  EtcdCluster etcd;
  etcd.hosts = on;
  for (int k : on) {
    const std::string client =
        absl::StrCat("http://", hosts.address(k), ":", kEtcdPort);
    etcd.members.push_back(std::make_unique<Subprocess>(
        hosts.On(k, {"etcd", "--name", absl::StrCat("m", k), "--data-dir",
                     absl::StrCat(dir, "/m", k), "--listen-client-urls", client,
                     "--advertise-client-urls", client, "--listen-peer-urls",
                     peer(k), "--initial-advertise-peer-urls", peer(k),
                     "--initial-cluster", absl::StrJoin(initial, ",")})));
  }
  for (auto& member : etcd.members) {
    INFO(member->output());
    REQUIRE(member->ReadUntil("ready to serve client requests", kTimeout));
  }
  return etcd;
}

// One acknowledgement in a journal: when, at which term, which version.
struct Ack {
  int64_t nanos = 0;
  uint64_t term = 0;
  uint64_t version = 0;
};

std::vector<Ack> ReadAcks(const std::string& path) {
  std::vector<Ack> acks;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    Ack a;
    int shard = -1;
    fields >> a.nanos >> shard >> a.term >> a.version;
    INFO(path << ": " << line);
    REQUIRE(!fields.fail());
    CHECK(shard == 0);
    acks.push_back(a);
  }
  return acks;
}

// Every acknowledgement of both servers: each term's on one server, no two
// terms' interleaved in time, each term's versions after the earlier
// terms'. Returns how many terms acknowledged.
int CheckOneAcknowledgerAtATime(const std::string& primary_log,
                                const std::string& backup_log) {
  struct Span {
    int64_t first = 0, last = 0;
    uint64_t low = 0, high = 0;
    std::string server;
  };
  std::map<uint64_t, Span> terms;
  for (const auto& [path, server] :
       {std::pair(primary_log, "primary"), std::pair(backup_log, "backup")}) {
    for (const Ack& a : ReadAcks(path)) {
      auto [it, fresh] = terms.try_emplace(
          a.term, Span{a.nanos, a.nanos, a.version, a.version, server});
      Span& s = it->second;
      INFO("term " << a.term);
      CHECK(s.server == server);
      if (fresh) continue;
      // A registration's or an epoch report's acknowledgement repeats the
      // version it was made at.
      CHECK(a.nanos >= s.last);
      CHECK(a.version >= s.high);
      s.last = a.nanos;
      s.high = a.version;
    }
  }
  const Span* before = nullptr;
  for (const auto& [term, span] : terms) {
    if (before != nullptr) {
      INFO("term " << term << " on the " << span.server << " from "
                   << span.first << " ns, version " << span.low
                   << "; the term before it until " << before->last
                   << " ns, version " << before->high);
      CHECK(span.first > before->last);
      // A new term starts at the version its server holds.
      CHECK(span.low >= before->high);
    }
    before = &span;
  }
  return static_cast<int>(terms.size());
}

struct Run {
  std::string figures[2];                // Each rank's.
  std::string primary, backup, workers;  // Their output.
  int primary_exit = -1;
  int terms = 0;
};

// The job across the hosts with its etcd members on `etcd_hosts`;
// `disturb(rank1, etcd)` runs once both servers serve.
template <typename Disturb>
Run RunJob(const TestHosts& hosts, const std::string& job,
           const std::vector<int>& etcd_hosts, Disturb disturb) {
  EtcdCluster etcd = StartEtcd(hosts, etcd_hosts);
  const std::string dir = NewTempDir();
  const std::string primary_acks = dir + "/primary.acks";
  const std::string backup_acks = dir + "/backup.acks";
  Subprocess backup(
      hosts.On(kBackup, {"server/paramd-server", "--job", job, "--shard", "0",
                         "--backup", "--ack_log", backup_acks}));
  REQUIRE(backup.ReadUntil("registered as", kTimeout));
  Subprocess primary(
      hosts.On(kPrimary, {"server/paramd-server", "--job", job, "--shard", "0",
                          "--ack_log", primary_acks}));
  INFO(primary.output());
  REQUIRE(primary.ReadUntil("registered as", kTimeout));
  Subprocess rank0(hosts.On(
      kWorkers, {"worker/paramd-worker", "--job", job, "--rank", "0"}));
  Subprocess rank1(hosts.On(
      kWorkers, {"worker/paramd-worker", "--job", job, "--rank", "1"}));
  disturb(rank1, etcd);
  Run run;
  const int code0 = rank0.Wait(kTimeout);
  const int code1 = rank1.Wait(kTimeout);
  run.workers = rank0.output() + rank1.output();
  INFO(run.workers);
  CHECK(code0 == 0);
  CHECK(code1 == 0);
  run.figures[0] = RankEpochFigures(rank0.output());
  run.figures[1] = RankEpochFigures(rank1.output());
  primary.Signal(SIGTERM);
  backup.Signal(SIGTERM);
  run.primary_exit = primary.Wait(kTimeout);
  backup.Wait(kTimeout);
  run.primary = primary.output();
  run.backup = backup.output();
  INFO(run.primary);
  INFO(run.backup);
  run.terms = CheckOneAcknowledgerAtATime(primary_acks, backup_acks);
  return run;
}

// A random point of rank 1's second epoch (25 ms a step): up to ~0.5 s.
void AfterFirstEpoch(Subprocess& rank1) {
  REQUIRE(rank1.ReadUntil("rank 1: epoch 1/", kTimeout));
  std::mt19937 random(std::random_device{}());
  const absl::Time until =
      absl::Now() + absl::Milliseconds(static_cast<int>(random() % 500));
  while (absl::Now() < until) {
  }
}

TEST_CASE(
    "fenced by etcd across hosts, a partitioned primary never acknowledges "
    "beside another and the sync job ends as undisturbed",
    "[hosts][coord][fence][process]") {
  TestHosts hosts(4);
  const std::string job = Job(hosts, kOneEtcd, 2);
  const Run calm =
      RunJob(hosts, job, kOneEtcd, [](Subprocess&, EtcdCluster&) {});
  REQUIRE(!calm.figures[0].empty());
  CHECK(calm.terms == 1);

  {
    INFO("(a) the primary cut off from its backup and etcd");
    const Run cut =
        RunJob(hosts, job, kOneEtcd, [&hosts](Subprocess& rank1, EtcdCluster&) {
          AfterFirstEpoch(rank1);
          hosts.Cut(kPrimary, kBackup);
          hosts.Cut(kPrimary, kEtcd);
        });
    INFO(cut.primary);
    INFO(cut.backup);
    CHECK(absl::StrContains(cut.primary, "gives the shard up"));
    CHECK(cut.primary_exit == 3);
    CHECK(absl::StrContains(cut.backup, "took over from the primary"));
    CHECK(cut.terms == 2);
    CHECK(cut.figures[0] == calm.figures[0]);
    CHECK(cut.figures[1] == calm.figures[1]);
    hosts.Heal(kPrimary, kBackup);
    hosts.Heal(kPrimary, kEtcd);
  }
  {
    INFO("(b) the primary cut off from the workers only");
    const Run cut =
        RunJob(hosts, job, kOneEtcd, [&hosts](Subprocess& rank1, EtcdCluster&) {
          AfterFirstEpoch(rank1);
          hosts.Cut(kPrimary, kWorkers);
          // The workers try the backup, which refuses: the primary holds it.
          REQUIRE(rank1.ReadUntil("does not take over", kTimeout));
          hosts.Heal(kPrimary, kWorkers);
        });
    INFO(cut.workers);
    CHECK(absl::StrContains(cut.workers, "holds the shard at term"));
    CHECK_FALSE(absl::StrContains(cut.backup, "took over"));
    CHECK(cut.terms == 1);
    // The workers went back to the primary only after keeping to the
    // backup for a lease, by when the primary had dropped them as silent
    // (liveness.lease_seconds): each rejoined at the round the job was in,
    // as any worker out of touch does, so the figures are not the
    // undisturbed ones; the job still ran to its end.
    CHECK(absl::StrContains(cut.workers, "rank 0: finished 3 epochs"));
    CHECK(absl::StrContains(cut.workers, "rank 1: finished 3 epochs"));
  }
}

TEST_CASE(
    "fenced by a three-member etcd across hosts, a member killed or the "
    "leader's host cut off changes no acknowledger, and the sync job ends as "
    "undisturbed",
    "[hosts][coord][fence][process]") {
  TestHosts hosts(6);
  // Leases of 5 s: a renewal that meets the lost member first still has
  // time for the others (each call waits a third of a lease) and for a
  // new leader's election.
  const std::string job = Job(hosts, kThreeEtcd, 5);
  const Run calm =
      RunJob(hosts, job, kThreeEtcd, [](Subprocess&, EtcdCluster&) {});
  REQUIRE(!calm.figures[0].empty());
  CHECK(calm.terms == 1);

  {
    INFO("(c) one etcd member killed");
    const Run cut = RunJob(hosts, job, kThreeEtcd,
                           [](Subprocess& rank1, EtcdCluster& etcd) {
                             AfterFirstEpoch(rank1);
                             const int leader = etcd.Leader();
                             for (size_t i = 0; i < etcd.hosts.size(); ++i) {
                               if (etcd.hosts[i] == leader) continue;
                               etcd.members[i]->Signal(SIGKILL);
                               break;
                             }
                           });
    CHECK(cut.terms == 1);
    CHECK(cut.figures[0] == calm.figures[0]);
    CHECK(cut.figures[1] == calm.figures[1]);
  }
  {
    INFO("(d) the etcd leader's host cut off from every other host");
    int cut_off = -1;
    const Run cut = RunJob(hosts, job, kThreeEtcd,
                           [&](Subprocess& rank1, EtcdCluster& etcd) {
                             AfterFirstEpoch(rank1);
                             cut_off = etcd.Leader();
                             for (int k = 0; k < 6; ++k) {
                               if (k != cut_off) hosts.Cut(cut_off, k);
                             }
                           });
    // A renewal may still miss its lease while the others elect a leader
    // (the primary then gives the shard up and its backup claims it): the
    // acknowledgers were checked one at a time either way.
    CHECK(cut.terms >= 1);
    CHECK(cut.figures[0] == calm.figures[0]);
    CHECK(cut.figures[1] == calm.figures[1]);
    for (int k = 0; k < 6; ++k) {
      if (k != cut_off) hosts.Heal(cut_off, k);
    }
  }
}

TEST_CASE(
    "servers found in etcd across hosts: a job whose file lists no server "
    "address trains with its servers and workers on hosts of their own, and "
    "its workers find a server SIGKILLed and started on another host",
    "[hosts][coord][members][process]") {
  TestHosts hosts(5);
  EtcdCluster etcd = StartEtcd(hosts, kOneEtcd);
  const int kNewHost = 4;
  JobOptions o;
  o.servers = {"127.0.0.1:0", "127.0.0.1:0"};
  o.epochs = 2;
  o.train_limit = 1024;
  o.test_limit = 128;
  const std::string dir = NewTempDir();
  std::string yaml =
      JobYaml(o) + "checkpoint:\n  dir: " + dir +
      "/checkpoints\n  every_steps: 4\ntesting:\n  slow_rank: 0\n  "
      "slow_step_ms: 20\n";
  const std::string listed = "servers: [\"127.0.0.1:0\", \"127.0.0.1:0\"]";
  REQUIRE(yaml.find(listed) != std::string::npos);
  yaml.replace(yaml.find(listed), listed.size(), "servers: {etcd: 2}");
  const std::string job = WriteFile(
      dir + "/job.yaml",
      yaml + absl::StrCat("coordination:\n  etcd: [\"", hosts.address(kEtcd),
                          ":", kEtcdPort, "\"]\n  lease_seconds: 2\n"));
  // Shard K on host K + 1, each on its host's address at a free port.
  auto start_server = [&](int shard, int host) {
    auto server = std::make_unique<Subprocess>(hosts.On(
        host,
        {"server/paramd-server", "--job", job, "--shard", absl::StrCat(shard),
         "--listen", absl::StrCat(hosts.address(host), ":0")}));
    INFO(server->output());
    REQUIRE(server->ReadUntil("registered as", kTimeout));
    return server;
  };
  std::vector<std::unique_ptr<Subprocess>> servers;
  for (int shard = 0; shard < 2; ++shard) {
    servers.push_back(start_server(shard, shard + 1));
  }
  std::vector<std::unique_ptr<Subprocess>> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.push_back(std::make_unique<Subprocess>(hosts.On(
        kWorkers,
        {"worker/paramd-worker", "--job", job, "--rank", absl::StrCat(rank)})));
  }
  // Server 0's host loses it mid-job; it starts again on another host,
  // from its checkpoint, and registers there.
  {
    const bool checkpointed =
        servers[0]->ReadUntil("checkpoint of version", kTimeout);
    INFO(servers[0]->output() << "\n--- rank 0:\n" << workers[0]->output());
    REQUIRE(checkpointed);
  }
  servers[0]->Signal(SIGKILL);
  servers[0]->Wait(kTimeout);
  servers[0] = start_server(0, kNewHost);
  for (auto& w : workers) {
    const int code = w->Wait(kTimeout);
    INFO(w->output());
    CHECK(code == 0);
    CHECK(absl::StrContains(w->output(), "epoch 2/2"));
    // Found at their hosts' addresses, by the socket, and server 0 again
    // at its new host's.
    CHECK(absl::StrContains(w->output(),
                            "shard 0's server at " + hosts.address(1)));
    CHECK(std::regex_search(
        w->output(),
        std::regex("shard 0: its server moved from " + hosts.address(1) +
                   R"(:\d+ to )" + hosts.address(kNewHost) + R"(:\d+)")));
  }
  CHECK(absl::StrContains(servers[0]->output(), "restored version"));
  for (auto& s : servers) s->Signal(SIGTERM);
  for (auto& s : servers) CHECK(s->Wait(kTimeout) == 0);
}

}  // namespace
}  // namespace paramd::testing
