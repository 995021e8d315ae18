// The status table and JSON that paramctl prints, from fixed ShardStatus
// messages: no servers, no gRPC.
#include "tools/ctl/status_format.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"

namespace paramd {
namespace {

proto::ShardStatus Shard0() {
  proto::ShardStatus st;
  st.set_job_id("fmnist");
  st.set_shard(0);
  st.set_num_shards(2);
  st.set_policy("ssp");
  st.set_staleness_bound(2);
  st.set_lease_seconds(10);
  st.set_chunks(3);
  st.set_bytes(1048576);
  st.set_version(42);
  st.set_pushes_per_second(12.5);
  st.set_pull_wait_p50_ms(1.25);
  st.set_pull_wait_p99_ms(9.5);
  st.set_bytes_in(3000000);
  st.set_bytes_out(4000000);
  st.set_total_epochs(5);
  for (int r = 0; r < 2; ++r) {
    proto::WorkerStatus* w = st.add_workers();
    w->set_rank(r);
    w->set_state(r == 0 ? "live" : "dead");
    w->set_clock(r == 0 ? 42 : 40);
    w->set_staleness(r == 0 ? 0 : 2);
    w->set_last_seen_seconds_ago(r == 0 ? 0.25 : -1);
    w->set_pushes(42);
    w->set_bytes_in(1000000);
    w->set_bytes_out(2000000);
    w->set_last_loss(0.5);
    w->set_registrations(1);
  }
  proto::EpochMetrics* e = st.add_epochs();
  e->set_epoch(1);
  e->set_workers_reported(2);
  e->set_complete(true);
  e->set_train_loss(0.6);
  e->set_test_accuracy(0.8125);
  e->set_samples_per_second(25000);
  e = st.add_epochs();
  e->set_epoch(2);
  e->set_workers_reported(1);
  e->set_train_loss(0.4);
  e->set_test_accuracy(0.84);
  e->set_samples_per_second(24000);
  proto::WaitingPull* p = st.add_waiting();
  p->set_rank(0);
  p->set_clock(43);
  p->set_waited_seconds(31.5);
  p->set_waiting_on("rank 1 to push clock 40");
  return st;
}

std::vector<ServerStatus> TwoServers() {
  return {{"127.0.0.1:5000", Shard0()},
          {"127.0.0.1:5001",
           absl::UnavailableError("GetStatus to 127.0.0.1:5001: refused")}};
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n');
}

TEST_CASE("the table has the job line, shards, workers, waits and epochs",
          "[status_format]") {
  const std::vector<std::string> lines = Lines(FormatStatusTable(TwoServers()));
  REQUIRE(lines.size() > 12);
  // The last complete epoch counts; epoch 2 has one report of two.
  CHECK(lines[0] ==
        "job fmnist   policy ssp (staleness 2)   2 shard(s)   lease 10s   "
        "epoch 1/5   last test accuracy 0.8125");
  CHECK(lines[1].empty());
  CHECK(lines[3] ==
        "0     127.0.0.1:5000        up         3    1048576       42     "
        "12.5     1.2ms     9.5ms       3.0       4.0");
  CHECK(lines[4] ==
        "1     127.0.0.1:5001        DOWN  GetStatus to 127.0.0.1:5001: "
        "refused");
  CHECK(lines[7] ==
        "0     live            42       0   0.2s ago       42       1.0       "
        "2.0     0.5000         1");
  CHECK(lines[8] ==
        "1     dead            40       2          -       42       1.0       "
        "2.0     0.5000         1");
  CHECK(lines[10] == "WAITING PULLS");
  CHECK(lines[11] ==
        "  shard 0: rank 0 at clock 43, 31.5s: rank 1 to push clock 40");
  CHECK(lines[14] ==
        "1      2/2            0.6000     0.8125        25000      yes");
  CHECK(lines[15] ==
        "2      1/2            0.4000     0.8400        24000       no");
}

TEST_CASE("a stalled pull is marked, with what the ranks it waits for did",
          "[status_format]") {
  proto::ShardStatus st = Shard0();
  st.mutable_waiting(0)->set_stalled(true);
  st.mutable_waiting(0)->add_waits_for(1);
  st.mutable_workers(1)->set_last_push_seconds_ago(12.04);
  st.mutable_workers(1)->set_last_heartbeat_seconds_ago(-1);
  const std::vector<std::string> lines =
      Lines(FormatStatusTable({{"127.0.0.1:5000", st}}));
  const auto at = std::find(lines.begin(), lines.end(), "WAITING PULLS");
  REQUIRE(at + 2 < lines.end());
  CHECK(at[1] ==
        "  shard 0: STALLED rank 0 at clock 43, 31.5s: rank 1 to push clock "
        "40");
  CHECK(at[2] ==
        "    rank 1: dead, clock 40, last push 12.0s ago, last heartbeat "
        "never");
}

TEST_CASE("async and ssp shards show their pushes' staleness",
          "[status_format]") {
  proto::ShardStatus st = Shard0();
  // None under sync; none before the first push.
  CHECK(FormatStatusTable({{"a", st}}).find("PUSH STALENESS") ==
        std::string::npos);
  st.set_staleness_scaling("inverse");
  CHECK(FormatStatusTable({{"a", st}}).find("PUSH STALENESS") ==
        std::string::npos);
  proto::CountHistogram* h = st.mutable_push_staleness();
  for (double b : {1, 2, 4}) h->add_upper_bounds(b);
  // 50 pushes at 1, 40 at 2, 9 at 3-4, 1 beyond 4.
  for (uint64_t c : {50, 90, 99, 100}) h->add_cumulative(c);
  h->set_count(100);
  h->set_sum(50 + 80 + 30 + 7);
  st.mutable_workers(0)->set_mean_push_staleness(1.25);
  st.mutable_workers(1)->set_mean_push_staleness(2.5);
  const std::string table = FormatStatusTable({{"a", st}});
  CHECK(table.find("PUSH STALENESS (versions since the pull)\n"
                   "  shard 0: mean 1.67 over 100 pushes, p50 <= 1, p99 <= 4, "
                   "scaling inverse\n    mean by rank: rank 0 1.25, rank 1 "
                   "2.50\n") != std::string::npos);
  h->set_cumulative(2, 98);
  CHECK(FormatStatusTable({{"a", st}}).find("p99 > 4,") != std::string::npos);
}

TEST_CASE("the job line names backup workers and the pushes they dropped",
          "[status_format]") {
  proto::ShardStatus st = Shard0();
  st.set_policy("sync");
  st.set_staleness_bound(-1);
  st.set_backup_workers(1);
  st.set_late_pushes(17);
  CHECK(Lines(FormatStatusTable({{"a", st}}))[0] ==
        "job fmnist   policy sync (backup workers 1, 17 late pushes dropped)"
        "   1 shard(s)   lease 10s   epoch 1/5   last test accuracy 0.8125");
}

TEST_CASE("clipped pushes and divergences get a line per shard",
          "[status_format]") {
  proto::ShardStatus st = Shard0();
  CHECK(FormatStatusTable({{"a", st}}).find("GUARDS") == std::string::npos);
  st.set_clipped_pushes(12);
  st.set_divergences(2);
  st.mutable_workers(1)->set_divergences(2);
  st.mutable_workers(1)->set_mean_loss(0.4321);
  st.set_guard_stopped("Push: the job was stopped by its guard");
  CHECK(
      FormatStatusTable({{"a", st}})
          .find("\nGUARDS\n  shard 0: 12 push(es) clipped, 2 divergence(s); "
                "rank 1: 2 (mean loss 0.4321)\n    STOPPED: Push: the job was "
                "stopped by its guard\n") != std::string::npos);
}

TEST_CASE("with every server down the table still lists them",
          "[status_format]") {
  std::vector<ServerStatus> down = {
      {"127.0.0.1:1", absl::UnavailableError("refused")}};
  const std::string table = FormatStatusTable(down);
  CHECK(table.rfind("SHARD", 0) == 0);  // no job line without an answer
  CHECK(table.find("DOWN  refused") != std::string::npos);
  CHECK(table.find("RANK") == std::string::npos);
  CHECK(table.find("EPOCH") == std::string::npos);
}

TEST_CASE("the JSON form carries each status or its error", "[status_format]") {
  const std::string json = FormatStatusJson(TwoServers());
  CHECK(json.rfind("{\"servers\": [{\"address\": \"127.0.0.1:5000\", "
                   "\"ok\": true, \"status\": {",
                   0) == 0);
  CHECK(json.find("\"job_id\":\"fmnist\"") != std::string::npos);
  CHECK(json.find("{\"address\": \"127.0.0.1:5001\", \"ok\": false, "
                  "\"error\": \"GetStatus to 127.0.0.1:5001: refused\"}") !=
        std::string::npos);
  // Control bytes and quotes in an error are escaped.
  const std::string escaped = FormatStatusJson(
      {{"a", absl::UnavailableError(std::string("q\"\n\x01", 4))}});
  CHECK(escaped.find("\"error\": \"q\\\"\\u000a\\u0001\"") !=
        std::string::npos);
  // A coordinated job's members, or why they could not be read.
  const absl::StatusOr<std::vector<JobMember>> members =
      std::vector<JobMember>{{"server", 0, "10.0.0.1:47320", "node-a", 4117},
                             {"worker", 1, "-", "node-\"c", 4230}};
  const std::string with = FormatStatusJson({}, &members);
  CHECK(
      with ==
      "{\"servers\": [], \"members\": [{\"kind\": \"server\", \"id\": 0, "
      "\"address\": \"10.0.0.1:47320\", \"host\": \"node-a\", \"pid\": 4117}, "
      "{\"kind\": \"worker\", \"id\": 1, \"address\": \"-\", \"host\": "
      "\"node-\\\"c\", \"pid\": 4230}]}\n");
  const absl::StatusOr<std::vector<JobMember>> unread =
      absl::UnavailableError("etcd Range at h:2379: down");
  CHECK(FormatStatusJson({}, &unread) ==
        "{\"servers\": [], \"members_error\": \"etcd Range at h:2379: "
        "down\"}\n");
  CHECK(FormatStatusJson({}) == "{\"servers\": []}\n");
}

}  // namespace
}  // namespace paramd

namespace paramd {
namespace {

TEST_CASE("embedding tables get a line per shard and table",
          "[status_format]") {
  proto::ShardStatus st;
  st.set_job_id("hashed");
  st.set_shard(1);
  st.set_num_shards(2);
  st.set_policy("sync");
  proto::TableStatus* t = st.add_tables();
  t->set_name("pixels");
  t->set_dim(32);
  t->set_rows(12345);
  t->set_bytes(3 * 1048576);
  t->set_rows_pulled(1000000);
  t->set_rows_pushed(999);
  t->set_rows_not_admitted(77);
  t->set_rows_evicted(4242);
  t->set_policy("async");
  t->set_rows_on_disk(20000);
  t->set_disk_bytes(5 * 1048576);
  const std::string table =
      FormatStatusTable({ServerStatus{"127.0.0.1:5001", st}});
  INFO(table);
  CHECK_THAT(table, Catch::Contains("SHARD TABLE        POLICY         ROWS "
                                    "    MAX_ROWS        MiB    ROWS_PULLED "
                                    "   ROWS_PUSHED   NOT_ADMITTED      "
                                    "EVICTED      ON_DISK   DISK_MiB\n"
                                    "1     pixels       async         12345 "
                                    "           -        3.0        1000000 "
                                    "           999             77         "
                                    "4242        20000        5.0\n"));
}

TEST_CASE("a binary classifier's epochs show their AUC and log loss",
          "[status_format]") {
  proto::ShardStatus st = Shard0();
  proto::EpochMetrics* e = st.mutable_epochs(0);
  e->set_test_scored(true);
  e->set_test_auc(0.78125);
  e->set_test_log_loss(0.4567);
  const std::string table =
      FormatStatusTable({ServerStatus{"127.0.0.1:5001", st}});
  INFO(table);
  CHECK_THAT(table,
             Catch::Contains("EPOCH  REPORTED   TRAIN_LOSS   TEST_ACC "
                             "TEST_AUC  LOG_LOSS    SAMPLES/S     DONE"));
  // The epoch without scores (an earlier evaluation) shows dashes.
  CHECK_THAT(table,
             Catch::Contains("1      2/2            0.6000     0.8125 "
                             "  0.7812    0.4567        25000      yes"));
  CHECK_THAT(table,
             Catch::Contains("2      1/2            0.4000     0.8400 "
                             "       -         -        24000       no"));
}

TEST_CASE("a shard waiting for its workers to declare the model says so",
          "[status_format]") {
  proto::ShardStatus st;
  st.set_job_id("declared");
  st.set_shard(1);
  st.set_num_shards(2);
  st.set_policy("sync");
  st.set_awaiting_declaration(
      "shard 1 waits for its workers to declare the model (DeclareModel): "
      "the job file lists no tensors");
  const std::string table =
      FormatStatusTable({ServerStatus{"127.0.0.1:5001", st}});
  INFO(table);
  CHECK_THAT(table, Catch::Contains("\nAWAITING THE MODEL\n  shard 1 waits "
                                    "for its workers to declare the model"));
  st.clear_awaiting_declaration();
  CHECK_THAT(FormatStatusTable({ServerStatus{"127.0.0.1:5001", st}}),
             !Catch::Contains("AWAITING"));
}

TEST_CASE(
    "with replicas the table shows the replica serving each shard, and a "
    "line per replica",
    "[status_format][replication]") {
  auto replica = [](uint32_t shard, const std::string& role, uint64_t version) {
    proto::ShardStatus st;
    st.set_job_id("j");
    st.set_shard(shard);
    st.set_num_shards(2);
    st.set_version(version);
    st.mutable_replica()->set_role(role);
    st.mutable_replica()->set_term(role == "backup" ? 1 : 2);
    return st;
  };
  proto::ShardStatus taken = replica(0, "primary", 40);
  taken.mutable_replica()->set_takeovers(1);
  taken.mutable_replica()->set_lag_versions(3);
  proto::ShardStatus held = replica(1, "backup", 0);
  held.mutable_replica()->set_held_version(41);
  held.mutable_replica()->set_peer_silent_seconds(0.25);
  proto::ShardStatus one = replica(1, "primary", 41);
  one.mutable_replica()->set_peer_in_sync(true);
  const std::vector<ServerStatus> all = {
      {"10.0.0.1:1", absl::UnavailableError("connection refused")},
      {"10.0.0.2:1", one},
      {"10.0.0.3:1", taken},
      {"10.0.0.4:1", held}};
  const std::vector<ServerStatus> serving = ServingReplicas(all, 2);
  REQUIRE(serving.size() == 2);
  CHECK(serving[0].address == "10.0.0.3:1");  // Its backup took over.
  CHECK(serving[1].address == "10.0.0.2:1");
  const std::string lines = ReplicaLines(all, 2);
  CHECK(absl::StrContains(lines,
                          "shard 0 at 10.0.0.1:1: no answer "
                          "(connection refused)"));
  CHECK(absl::StrContains(lines,
                          "shard 1 at 10.0.0.2:1: primary, term 2, "
                          "backup in sync"));
  CHECK(absl::StrContains(lines,
                          "shard 0 at 10.0.0.3:1: primary, term 2, backup NOT "
                          "in sync (3 version(s) behind), 1 take-over(s)"));
  CHECK(absl::StrContains(lines,
                          "shard 1 at 10.0.0.4:1: backup, term 1, "
                          "holds version 41, primary heard 0.2s ago"));
}

TEST_CASE("the members of a coordinated job are a table of their own",
          "[status][coord]") {
  const std::string none = MemberLines({});
  CHECK(none == "\nMEMBERS (coordination.etcd)\n  none registered\n");
  const std::string two =
      MemberLines({JobMember{"server", 0, "10.0.0.1:47320", "node-a", 4117},
                   JobMember{"worker", 12, "-", "node-c", 4230}});
  CHECK(two ==
        "\nMEMBERS (coordination.etcd)\n"
        "  KIND       ID  ADDRESS                HOST             PID\n"
        "  server      0  10.0.0.1:47320         node-a           4117\n"
        "  worker     12  -                      node-c           4230\n");
}

}  // namespace
}  // namespace paramd
