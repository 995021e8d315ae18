// A push streamed as several messages, assembled without sockets: each
// message checked as it arrives, the push applied whole or not at all.
#include "server/shard/push_assembler.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "server/shard/shard.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

struct Fixture {
  Fixture() {
    testing::JobOptions o;
    o.servers = {"127.0.0.1:0"};
    o.workers = 1;
    o.layers = "[20, 10]";
    o.chunk_bytes = 256;  // 210 floats in 4 chunks
    config = testing::MakeJob(o, testing::NewTempDir());
    shard = *Shard::Create(config, 0);
    REQUIRE(shard->store().num_chunks() >= 3);
    for (bool join : {false, true}) {
      proto::RegisterRequest r;
      r.set_job_id(config.job_id);
      r.set_plan_fingerprint(shard->plan().fingerprint());
      r.set_join(join);
      proto::RegisterResponse response;
      REQUIRE(shard->Register(r, &response).ok());
    }
  }

  // One message per chunk the shard owns, each element `value`; the first
  // names the job, rank 0 and `clock`.
  std::vector<std::string> Messages(uint64_t clock, float value) const {
    std::vector<std::string> messages;
    for (int local = 0; local < shard->store().num_chunks(); ++local) {
      const ChunkSpec& spec = shard->store().chunk_spec(local);
      proto::PushRequest m;
      if (local == 0) {
        m.set_job_id(config.job_id);
        m.set_clock(clock);
      }
      proto::TensorChunk* chunk = m.add_chunks();
      chunk->set_tensor_id(spec.tensor_id);
      chunk->set_chunk_index(spec.chunk_index);
      chunk->set_dtype(proto::DTYPE_FLOAT32);
      const std::vector<float> g(spec.length, value);
      chunk->set_data(g.data(), g.size() * sizeof(float));
      messages.push_back(m.SerializeAsString());
    }
    return messages;
  }

  JobConfig config;
  std::unique_ptr<Shard> shard;
};

absl::Status AddWhole(PushAssembler& push, const std::string& message) {
  const absl::string_view segment(message);
  return push.Add(absl::MakeConstSpan(&segment, 1));
}

TEST_CASE("a clean stream is applied once, whole", "[push_assembler]") {
  Fixture f;
  PushAssembler push(f.shard.get());
  const std::vector<std::string> messages = f.Messages(0, 0.5f);
  for (const std::string& m : messages) REQUIRE(AddWhole(push, m).ok());
  CHECK(push.messages() == messages.size());
  CHECK(f.shard->store().version() == 0);  // nothing before Finish
  proto::PushResponse response;
  REQUIRE(push.Finish(/*cancelled=*/false, &response).ok());
  CHECK(response.version() == 1);
  CHECK(f.shard->store().version() == 1);
}

TEST_CASE("messages split across received slices assemble the same",
          "[push_assembler]") {
  Fixture f;
  PushAssembler push(f.shard.get());
  const std::vector<std::string> messages = f.Messages(0, 0.25f);
  for (const std::string& m : messages) {
    // Slices of 7 bytes: every chunk straddles slices and is copied out.
    std::vector<absl::string_view> slices;
    for (size_t i = 0; i < m.size(); i += 7) {
      slices.push_back(absl::string_view(m).substr(i, 7));
    }
    REQUIRE(push.Add(slices).ok());
  }
  proto::PushResponse response;
  REQUIRE(push.Finish(false, &response).ok());
  CHECK(f.shard->store().version() == 1);
}

TEST_CASE("a bad chunk in any message refuses the whole push",
          "[push_assembler]") {
  Fixture f;
  std::vector<std::string> messages = f.Messages(0, 0.5f);
  // The last message's gradient holds a NaN.
  std::vector<std::string> poisoned = f.Messages(0, NAN);
  messages.back() = poisoned.back();
  PushAssembler push(f.shard.get());
  for (size_t i = 0; i + 1 < messages.size(); ++i) {
    REQUIRE(AddWhole(push, messages[i]).ok());
  }
  const absl::Status bad = AddWhole(push, messages.back());
  CHECK(absl::IsInvalidArgument(bad));
  CHECK_THAT(std::string(bad.message()),
             Catch::StartsWith("PushStream message " +
                               std::to_string(messages.size()) + ": ") &&
                 Catch::Contains("is not finite"));
  // Refused from then on, and never applied.
  CHECK(AddWhole(push, messages[0]) == bad);
  proto::PushResponse response;
  CHECK(push.Finish(false, &response) == bad);
  CHECK(f.shard->store().version() == 0);
}

TEST_CASE("only the first message names job, rank, clock and loss",
          "[push_assembler]") {
  Fixture f;
  PushAssembler push(f.shard.get());
  std::vector<std::string> messages = f.Messages(0, 0.5f);
  proto::PushRequest second;
  REQUIRE(second.ParseFromString(messages[1]));
  second.set_rank(3);
  REQUIRE(AddWhole(push, messages[0]).ok());
  const absl::Status s = AddWhole(push, second.SerializeAsString());
  CHECK(absl::IsInvalidArgument(s));
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("PushStream message 2: only the first message"));
  proto::PushResponse response;
  CHECK_FALSE(push.Finish(false, &response).ok());
  CHECK(f.shard->store().version() == 0);
}

TEST_CASE("a stream may not carry more chunks than the shard owns",
          "[push_assembler]") {
  Fixture f;
  PushAssembler push(f.shard.get());
  const std::vector<std::string> messages = f.Messages(0, 0.5f);
  // Chunk 0 again and again: each valid on its own.
  REQUIRE(AddWhole(push, messages[0]).ok());
  proto::PushRequest again;
  REQUIRE(again.ParseFromString(messages[0]));
  again.clear_job_id();
  again.clear_clock();
  absl::Status s;
  size_t added = 1;
  while (s.ok() && added <= messages.size()) {
    s = AddWhole(push, again.SerializeAsString());
    ++added;
  }
  CHECK(absl::IsInvalidArgument(s));
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("more than the " +
                             std::to_string(messages.size()) + " chunks"));
  CHECK(added == messages.size() + 1);
  CHECK(f.shard->store().version() == 0);
}

TEST_CASE("an empty, cancelled or incomplete stream applies nothing",
          "[push_assembler]") {
  Fixture f;
  proto::PushResponse response;
  {
    PushAssembler push(f.shard.get());
    const absl::Status s = push.Finish(false, &response);
    CHECK(absl::IsInvalidArgument(s));
    CHECK(s.message() == "PushStream: no message arrived");
  }
  const std::vector<std::string> messages = f.Messages(0, 0.5f);
  {
    PushAssembler push(f.shard.get());
    for (const std::string& m : messages) REQUIRE(AddWhole(push, m).ok());
    CHECK(absl::IsCancelled(push.Finish(/*cancelled=*/true, &response)));
  }
  {
    // Every message but the last: Shard::Push finds the set incomplete.
    PushAssembler push(f.shard.get());
    for (size_t i = 0; i + 1 < messages.size(); ++i) {
      REQUIRE(AddWhole(push, messages[i]).ok());
    }
    const absl::Status s = push.Finish(false, &response);
    CHECK(absl::IsInvalidArgument(s));
    CHECK_THAT(std::string(s.message()),
               Catch::Contains("chunks; shard 0 owns"));
  }
  CHECK(f.shard->store().version() == 0);
}

TEST_CASE("a streamed chunk with an id outside the plan is refused",
          "[push_assembler]") {
  Fixture f;
  std::vector<std::string> messages = f.Messages(0, 0.5f);
  proto::PushRequest second;
  REQUIRE(second.ParseFromString(messages[1]));
  second.mutable_chunks(0)->set_tensor_id(0x7FFFFFFF);
  PushAssembler push(f.shard.get());
  REQUIRE(AddWhole(push, messages[0]).ok());
  const absl::Status s = AddWhole(push, second.SerializeAsString());
  CHECK(absl::IsInvalidArgument(s));
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("PushStream message 2: Push: chunk") &&
                 Catch::Contains("of tensor 2147483647 is not owned"));
  proto::PushResponse response;
  CHECK_FALSE(push.Finish(false, &response).ok());
  CHECK(f.shard->store().version() == 0);
}

}  // namespace
}  // namespace paramd
