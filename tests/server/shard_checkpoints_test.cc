// A shard's checkpoints (ShardCheckpoints through Shard): written off the
// push's path, restored at start with retries recognised, an older one
// caught up, another job's or policy's refused.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/base/half.h"
#include "server/checkpoint/file_system.h"
#include "server/shard/proto_convert.h"
#include "server/shard/shard.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

using testing::JobOptions;

// A shard of a 2-worker job with checkpoints every 2 versions in a new
// folder; Restart builds a new one from the same folder, as a restarted
// process does.
struct CheckpointFixture {
  explicit CheckpointFixture(const std::string& policy,
                             FileSystem* file_system = nullptr) {
    options.file_system = file_system;
    JobOptions o;
    o.servers = {"127.0.0.1:0"};
    o.layers = "[784, 8, 10]";
    o.policy = policy;
    o.staleness = 1;
    config = testing::MakeJob(o, testing::NewTempDir());
    config.checkpoint.dir = testing::NewTempDir() + "/checkpoints";
    config.checkpoint.every_steps = 2;
    Restart();
  }
  void Restart() {
    shard.reset();
    auto created = Shard::Create(config, 0, nullptr, options);
    INFO(created.status().ToString());
    REQUIRE(created.ok());
    shard = *std::move(created);
  }
  // Both phases; returns the clock joined at.
  uint64_t Register(uint32_t rank) {
    proto::RegisterRequest req;
    req.set_job_id(config.job_id);
    req.set_rank(rank);
    req.set_plan_fingerprint(shard->plan().fingerprint());
    proto::RegisterResponse resp;
    REQUIRE(shard->Register(req, &resp).ok());
    req.set_join(true);
    req.set_clock(resp.clock());
    REQUIRE(shard->Register(req, &resp).ok());
    return resp.clock();
  }
  absl::Status Push(uint32_t rank, uint64_t clock, bool* duplicate = nullptr) {
    proto::PushResponse resp;
    absl::Status s = shard->Push(
        testing::WholePush(*shard, config.job_id, rank, clock, 0.5f + rank),
        &resp);
    if (duplicate != nullptr) *duplicate = resp.duplicate();
    return s;
  }
  // Once the checkpoints pushes handed over are written.
  proto::ShardStatus Status() {
    shard->FlushCheckpoints();
    return StatusNow();
  }
  proto::ShardStatus StatusNow() {
    proto::ShardStatus st;
    shard->GetStatus(&st);
    return st;
  }
  std::vector<float> Params() {
    std::vector<float> out;
    shard->store().Read([&](uint64_t, absl::Span<const std::vector<float>> c) {
      for (const auto& chunk : c)
        out.insert(out.end(), chunk.begin(), chunk.end());
    });
    return out;
  }
  JobConfig config;
  ShardOptions options;
  std::unique_ptr<Shard> shard;
};

// The machine's file system, but a checkpoint's file is written only once
// the gate is open; the writes waiting there are counted.
class GatedFileSystem final : public FileSystem {
 public:
  void OpenGate() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  // Waits until a checkpoint write waits at the gate.
  bool AwaitBlocked(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto blocked = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return blocked_ > 0;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&blocked), timeout);
  }

  absl::Status WriteFileSynced(const std::string& path,
                               absl::string_view data) override {
    if (absl::StrContains(path, ".ckpt")) {
      absl::MutexLock lock(&mu_);
      ++blocked_;
      mu_.Await(absl::Condition(&open_));
      --blocked_;
    }
    return local_->WriteFileSynced(path, data);
  }
  absl::Status MakeDirs(const std::string& dir) override {
    return local_->MakeDirs(dir);
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    return local_->Rename(from, to);
  }
  absl::Status SyncDir(const std::string& dir) override {
    return local_->SyncDir(dir);
  }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    return local_->ReadFile(path);
  }
  absl::StatusOr<std::vector<std::string>> List(
      const std::string& dir) override {
    return local_->List(dir);
  }
  absl::Status Remove(const std::string& path) override {
    return local_->Remove(path);
  }

 private:
  FileSystem* const local_ = LocalFileSystem();
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_CASE(
    "pushes do not wait for the disk: a checkpoint is written by the shard's "
    "own thread, and one not yet written gives way to a newer capture",
    "[shard][checkpoint]") {
  GatedFileSystem disk;
  CheckpointFixture f("sync", &disk);
  f.Register(0);
  f.Register(1);
  auto round = [&f](uint64_t clock) {
    REQUIRE(f.Push(0, clock).ok());
    REQUIRE(f.Push(1, clock).ok());
  };
  round(0);
  round(1);  // Version 2: captured, and its write waits at the gate.
  REQUIRE(disk.AwaitBlocked(absl::Seconds(30)));
  round(2);
  round(3);  // Version 4: captured while 2 is being written.
  round(4);
  round(5);  // Version 6: replaces 4, which was never written.
  proto::ShardStatus st = f.StatusNow();
  CHECK(st.version() == 6);
  CHECK(st.checkpoint_path().empty());  // Nothing written yet.

  disk.OpenGate();
  st = f.Status();
  CHECK(st.checkpoint_version() == 6);
  auto files = LocalFileSystem()->List(f.config.checkpoint.dir);
  REQUIRE(files.ok());
  std::vector<std::string> checkpoints;
  for (const std::string& name : *files) {
    if (absl::EndsWith(name, ".ckpt")) checkpoints.push_back(name);
  }
  std::sort(checkpoints.begin(), checkpoints.end());
  CHECK(checkpoints ==
        std::vector<std::string>{"shard-0-v00000000000000000002.ckpt",
                                 "shard-0-v00000000000000000006.ckpt"});

  // A capture still waiting when the shard stops is written on the way out.
  round(6);
  round(7);  // Version 8.
  const std::vector<float> at_8 = f.Params();
  f.Restart();
  st = f.StatusNow();
  CHECK(st.version() == 8);
  CHECK(f.Params() == at_8);
}

TEST_CASE(
    "pushes taken as slices (a StepStream's full-duplex step) are "
    "checkpointed every checkpoint.every_steps as whole ones are",
    "[shard][checkpoint][slices]") {
  CheckpointFixture f("sync");
  REQUIRE(ServersTakeSlices(f.config));
  f.Register(0);
  f.Register(1);
  for (uint64_t clock = 0; clock < 4; ++clock) {
    for (uint32_t rank = 0; rank < 2; ++rank) {
      const proto::PushRequest whole = testing::WholePush(
          *f.shard, f.config.job_id, rank, clock, 0.5f + rank);
      PushView view = ToPushView(whole);
      REQUIRE(view.chunks.size() >= 2);
      // Two slices: the first chunk, then the rest.
      const absl::Span<const ChunkView> chunks(view.chunks);
      bool complete = true;
      REQUIRE(f.shard->PushSlice(view, chunks.subspan(0, 1), &complete).ok());
      CHECK_FALSE(complete);
      REQUIRE(f.shard->PushSlice(view, chunks.subspan(1), &complete).ok());
      CHECK(complete);
    }
  }
  // Versions 2 and 4 were captured and written (before 2026-12-07 a slice
  // never handed its capture over: no checkpoint until the shard stopped).
  const proto::ShardStatus st = f.Status();
  CHECK(st.version() == 4);
  CHECK(st.checkpoint_version() == 4);
  const std::vector<float> at_4 = f.Params();
  f.Restart();
  CHECK(f.StatusNow().version() == 4);
  CHECK(f.Params() == at_4);
}

TEST_CASE(
    "a restarted shard restores its newest checkpoint; retries of pushes it "
    "holds are acknowledged, pushes after it are applied again",
    "[shard][checkpoint][exactly-once]") {
  CheckpointFixture f("sync");
  CHECK(f.Status().restored_from().empty());
  f.Register(0);
  f.Register(1);
  for (uint64_t clock : {0, 1}) {
    REQUIRE(f.Push(0, clock).ok());
    REQUIRE(f.Push(1, clock).ok());
  }
  proto::ShardStatus st = f.Status();
  REQUIRE(st.version() == 2);
  CHECK(st.checkpoint_version() == 2);  // Written as version 2 was reached.
  CHECK_THAT(st.checkpoint_path(),
             Catch::EndsWith("/shard-0-v00000000000000000002.ckpt"));
  const std::vector<float> at_2 = f.Params();
  REQUIRE(f.Push(0, 2).ok());  // Round 2 is open when the process dies.

  f.Restart();
  st = f.Status();
  CHECK(st.version() == 2);
  CHECK(st.restored_from() == st.checkpoint_path());
  CHECK(f.Params() == at_2);
  // The restarted process knows no registration.
  CHECK(absl::IsAborted(f.Push(1, 1)));
  CHECK(f.Register(0) == 2);
  CHECK(f.Register(1) == 2);
  // Rank 1's push of clock 1 is in the checkpoint: a retry is acknowledged.
  bool duplicate = false;
  REQUIRE(f.Push(1, 1, &duplicate).ok());
  CHECK(duplicate);
  CHECK(f.Params() == at_2);
  // Rank 0's push of clock 2 came after it: sent again, it is applied.
  REQUIRE(f.Push(0, 2, &duplicate).ok());
  CHECK_FALSE(duplicate);
  REQUIRE(f.Push(1, 2, &duplicate).ok());
  CHECK_FALSE(duplicate);
  CHECK(f.Status().version() == 3);
}

TEST_CASE(
    "a shard restored from an older checkpoint catches up with the job's "
    "clock when workers register",
    "[shard][checkpoint]") {
  for (const char* policy : {"sync", "async", "ssp"}) {
    SECTION(policy) {
      CheckpointFixture f(policy);
      f.Register(0);
      f.Register(1);
      for (uint64_t clock : {0, 1}) {
        REQUIRE(f.Push(0, clock).ok());
        REQUIRE(f.Push(1, clock).ok());
      }
      REQUIRE(f.Status().checkpoint_version() >= 2);
      f.Restart();
      // The other shards went on to clock 7 meanwhile: the workers join
      // there (their two-phase registration takes the largest proposal).
      for (uint32_t rank : {0u, 1u}) {
        for (bool join : {false, true}) {
          proto::RegisterRequest req;
          req.set_job_id(f.config.job_id);
          req.set_rank(rank);
          req.set_plan_fingerprint(f.shard->plan().fingerprint());
          req.set_join(join);
          req.set_clock(join ? 7 : 0);
          proto::RegisterResponse resp;
          const absl::Status s = f.shard->Register(req, &resp);
          INFO(s.ToString());
          REQUIRE(s.ok());
        }
      }
      REQUIRE(f.Push(0, 7).ok());
      REQUIRE(f.Push(1, 7).ok());
      if (std::string(policy) == "sync") CHECK(f.Status().version() == 8);
      // Once pushes flow, a clock beyond the slack is refused again.
      proto::RegisterRequest req;
      req.set_job_id(f.config.job_id);
      req.set_rank(0);
      req.set_plan_fingerprint(f.shard->plan().fingerprint());
      req.set_join(true);
      req.set_clock(100);
      proto::RegisterResponse resp;
      CHECK(absl::IsInvalidArgument(f.shard->Register(req, &resp)));
    }
  }
}

TEST_CASE("a checkpoint of another policy or job is refused at start",
          "[shard][checkpoint]") {
  CheckpointFixture f("sync");
  f.Register(0);
  f.Register(1);
  REQUIRE(f.shard->CheckpointNow().ok());
  f.shard.reset();
  JobConfig other = f.config;
  other.policy.type = PolicyType::kAsync;
  auto s = Shard::Create(other, 0);
  CHECK(absl::IsFailedPrecondition(s.status()));
  CHECK_THAT(std::string(s.status().message()),
             Catch::Contains("was written under policy sync; the job's "
                             "policy is async"));
  other = f.config;
  other.job_id = "another-job";
  s = Shard::Create(other, 0);
  CHECK(absl::IsFailedPrecondition(s.status()));
  CHECK_THAT(std::string(s.status().message()),
             Catch::Contains("is of job '" + f.config.job_id + "'"));
  // --fresh discards them.
  s = Shard::Create(other, 0, nullptr, ShardOptions{nullptr, true});
  REQUIRE(s.ok());
  CHECK((*s)->store().version() == 0);
}

}  // namespace
}  // namespace paramd
