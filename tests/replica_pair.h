// Two replicas of one shard in this process for tests of ShardReplica:
// the peers call each other directly (DirectPeer), through a switchboard
// that can take an address down or make the next calls time out.
#ifndef PARAMD_TESTS_REPLICA_PAIR_H_
#define PARAMD_TESTS_REPLICA_PAIR_H_

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "server/shard/shard.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd::testing {

// Calls the shard at an address ("a:1", "b:1") directly; an address in
// `down` does not answer.
class DirectPeer final : public ReplicaPeer {
 public:
  DirectPeer(std::map<std::string, Shard*>* shards, std::set<std::string>* down,
             int* drop_next, int* calls, std::string address)
      : shards_(shards),
        down_(down),
        drop_next_(drop_next),
        calls_(calls),
        address_(std::move(address)) {}
  absl::Status Replicate(std::shared_ptr<const proto::ReplicateRequest> request,
                         absl::Duration,
                         proto::ReplicateResponse* response) override {
    ++*calls_;
    if (*drop_next_ > 0) {
      --*drop_next_;
      return absl::DeadlineExceededError("dropped");
    }
    Shard* to = Find();
    if (to == nullptr) return absl::UnavailableError("peer down");
    proto::ReplicateRequest copy = *request;  // As if it came over the wire.
    return to->replica()->Replicate(&copy, response);
  }
  absl::Status Handover(const proto::HandoverRequest& request, absl::Duration,
                        proto::HandoverResponse* response) override {
    Shard* to = Find();
    if (to == nullptr) return absl::UnavailableError("peer down");
    return to->replica()->Handover(request, response);
  }

 private:
  Shard* Find() const {
    if (down_->count(address_) > 0) return nullptr;
    auto it = shards_->find(address_);
    return it == shards_->end() ? nullptr : it->second;
  }
  std::map<std::string, Shard*>* const shards_;
  std::set<std::string>* const down_;
  int* const drop_next_;
  int* const calls_;
  const std::string address_;
};

// A shard's primary "a:1" and its backup "b:1" on a fake clock. Started
// at once unless `start` is false (then set what comes before Start —
// fences — and call Start).
struct Pair {
  explicit Pair(const std::string& policy, int workers = 1, bool start = true) {
    JobOptions o;
    o.servers = {"127.0.0.1:0"};
    o.workers = workers;
    o.layers = "[784, 8, 10]";
    o.policy = policy;
    o.lease_seconds = 4;
    config = MakeJob(o, NewTempDir());
    config.replication.factor = 2;
    config.replication.backups = {"127.0.0.1:0"};
    a = Make(false);
    b = Make(true);
    shards["a:1"] = a.get();
    shards["b:1"] = b.get();
    b->replica()->SetPeer(Connect(), "b:1", "");
    a->replica()->SetPeer(Connect(), "a:1", "b:1");
    if (start) Start();
  }

  // The backup starts first, without its primary's address (port 0).
  void Start() {
    REQUIRE(b->replica()->Start().ok());
    REQUIRE(a->replica()->Start().ok());
    RegisterAtZero(*a, config.job_id, 0);
  }

  std::unique_ptr<Shard> Make(bool backup) {
    ShardOptions options;
    options.backup = backup;
    auto shard = Shard::Create(config, 0, &clock, options);
    REQUIRE(shard.ok());
    return *std::move(shard);
  }

  ShardReplica::Connect Connect() {
    return [this](const std::string& address) {
      ++connects;
      return std::make_unique<DirectPeer>(&shards, &down, &drop_next,
                                          &replicate_calls, address);
    };
  }

  absl::Status Push(Shard& shard, uint64_t clock, float value,
                    proto::PushResponse* response = nullptr,
                    uint32_t rank = 0) {
    proto::PushResponse ignored;
    return shard.Push(WholePush(shard, config.job_id, rank, clock, value),
                      response != nullptr ? response : &ignored);
  }

  // A worker's heartbeat at `shard` (a backup's takes over after a lease
  // of silence).
  absl::Status Heartbeat(Shard& shard) {
    proto::HeartbeatRequest beat;
    beat.set_job_id(config.job_id);
    proto::HeartbeatResponse reply;
    return shard.Heartbeat(beat, &reply);
  }

  static proto::ReplicaStatus Replica(Shard& shard) {
    proto::ShardStatus st;
    shard.GetStatus(&st);
    return st.replica();
  }

  FakeClock clock;
  JobConfig config;
  std::unique_ptr<Shard> a, b;
  std::map<std::string, Shard*> shards;
  std::set<std::string> down;
  int drop_next = 0;        // Replicate calls (to any peer) that time out.
  int replicate_calls = 0;  // Replicate calls made (to any peer).
  int connects = 0;         // Channels made (to any peer).
};

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_REPLICA_PAIR_H_
