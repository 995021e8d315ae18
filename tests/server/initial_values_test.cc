// model.initial_values: rank0 — a shard whose first values are rank 0's:
// no pull reads it and no push lands until they come, they come once, and
// only from rank 0 of a job that asks for them.
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "common/config/job_file.h"
#include "server/shard/proto_convert.h"
#include "server/shard/shard.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

using testing::JobOptions;
using testing::JobYaml;
using testing::NewTempDir;
using testing::PullAt;
using testing::RegisterAtZero;
using testing::WholePush;
using testing::WriteFile;

JobConfig TensorsJob(bool from_rank0) {
  JobOptions o;
  o.model_type = "tensors";
  o.layers = "";
  o.servers = {"127.0.0.1:0"};
  o.model_extra = std::string(from_rank0 ? "  initial_values: rank0\n" : "") +
                  "  tensors:\n"
                  "    - {name: w, shape: [6, 4], init: uniform, bound: 0.5}\n"
                  "    - {name: b, shape: [6], init: constant, value: 0}\n";
  absl::StatusOr<JobConfig> config =
      LoadJobConfig(WriteFile(NewTempDir() + "/job.yaml", JobYaml(o)));
  REQUIRE(config.ok());
  return *config;
}

// Every value of the shard's snapshot for a pull that was served.
std::vector<float> Values(const ParamSnapshot& snapshot) {
  std::vector<float> out;
  for (const auto& chunk : snapshot.params) {
    out.insert(out.end(), chunk.begin(), chunk.end());
  }
  return out;
}

TEST_CASE("a shard waits for rank 0's initial values, then serves them",
          "[initial_values]") {
  const JobConfig config = TensorsJob(true);
  CHECK(config.model.initial_values_from_rank0);
  absl::StatusOr<std::unique_ptr<Shard>> made = Shard::Create(config, 0);
  REQUIRE(made.ok());
  Shard& shard = **made;
  RegisterAtZero(shard, config.job_id, 0);
  RegisterAtZero(shard, config.job_id, 1);
  // Rank 1's pull of clock 0 waits.
  absl::Notification served;
  std::shared_ptr<const ParamSnapshot> got;
  const uint64_t handle = shard.StartPull(
      PullAt(config.job_id, 1, 0),
      [&](absl::StatusOr<std::shared_ptr<const ParamSnapshot>> s) {
        REQUIRE(s.ok());
        got = *s;
        served.Notify();
      });
  CHECK(handle != 0);
  CHECK_FALSE(served.HasBeenNotified());
  CHECK(shard.policy().WaitingOn(1, 0) ==
        "rank 0's initial values (model.initial_values: rank0)");
  // A push before them is refused, and so are rank 1's values.
  proto::PushResponse response;
  absl::Status s =
      shard.Push(WholePush(shard, config.job_id, 0, 0, 0.5f), &response);
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(s.message().find("before the shard has rank 0's initial values") !=
        std::string::npos);
  s = shard.Initialize(ToPushView(WholePush(shard, config.job_id, 1, 0, 3)),
                       &response);
  CHECK(absl::IsInvalidArgument(s));
  CHECK(s.message().find("only rank 0's are the job's") != std::string::npos);
  CHECK(absl::IsFailedPrecondition(shard.CheckpointNow().status()));
  // Rank 0's values: the pull goes on with exactly them.
  REQUIRE(
      shard
          .Initialize(ToPushView(WholePush(shard, config.job_id, 0, 0, 2.5f)),
                      &response)
          .ok());
  CHECK(response.version() == 0);
  REQUIRE(served.WaitForNotificationWithTimeout(absl::Seconds(30)));
  CHECK(got->version == 0);
  CHECK(Values(*got) == std::vector<float>(30, 2.5f));
  // Once: a repeat (rank 0 restarted) changes nothing.
  REQUIRE(shard
              .Initialize(ToPushView(WholePush(shard, config.job_id, 0, 0, 9)),
                          &response)
              .ok());
  proto::PullResponse pulled;
  REQUIRE(testing::PullInto(shard, PullAt(config.job_id, 0, 0),
                            absl::Now() + absl::Seconds(30), nullptr, &pulled)
              .ok());
  for (const proto::TensorChunk& c : pulled.chunks()) {
    const float* v = reinterpret_cast<const float*>(c.data().data());
    for (size_t i = 0; i < c.data().size() / 4; ++i) CHECK(v[i] == 2.5f);
  }
  // And training goes on from them.
  REQUIRE(
      shard.Push(WholePush(shard, config.job_id, 0, 0, 0.5f), &response).ok());
  REQUIRE(
      shard.Push(WholePush(shard, config.job_id, 1, 0, 0.5f), &response).ok());
  CHECK(response.version() == 1);
}

TEST_CASE("a job whose servers draw their values refuses initial values",
          "[initial_values]") {
  const JobConfig config = TensorsJob(false);
  absl::StatusOr<std::unique_ptr<Shard>> made = Shard::Create(config, 0);
  REQUIRE(made.ok());
  Shard& shard = **made;
  RegisterAtZero(shard, config.job_id, 0);
  proto::PushResponse response;
  absl::Status s = shard.Initialize(
      ToPushView(WholePush(shard, config.job_id, 0, 0, 1)), &response);
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(s.message().find("model.initial_values is not rank0") !=
        std::string::npos);
  // An incomplete set of chunks is refused before anything changes.
  proto::PushRequest partial = WholePush(shard, config.job_id, 0, 0, 1);
  partial.mutable_chunks()->RemoveLast();
  const JobConfig waiting = TensorsJob(true);
  absl::StatusOr<std::unique_ptr<Shard>> other = Shard::Create(waiting, 0);
  REQUIRE(other.ok());
  RegisterAtZero(**other, waiting.job_id, 0);
  partial.set_job_id(waiting.job_id);
  s = (*other)->Initialize(ToPushView(partial), &response);
  CHECK(absl::IsInvalidArgument(s));
  CHECK(s.message().find("Initialize: rank 0 sent") != std::string::npos);
  CHECK((*other)->policy().AwaitingInitialValues());
}

}  // namespace
}  // namespace paramd
