// The shard's request checks, as plain C++: every bad request is refused
// with an error naming it, and the shard's state stays exactly as it was.
#include "server/shard/shard.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "common/base/cancellation.h"
#include "common/base/half.h"
#include "common/base/score_histogram.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

using testing::JobOptions;

struct Fixture {
  explicit Fixture(bool register_ranks = true) {
    JobOptions o;
    o.servers = {"127.0.0.1:0"};
    o.layers = "[784, 16, 10]";
    o.chunk_bytes = 8192;
    config = testing::MakeJob(o, testing::NewTempDir());
    shard = *Shard::Create(config, 0);
    if (register_ranks) {
      for (uint32_t rank : {0u, 1u}) RegisterRank(rank);
    }
  }

  // Both phases of Register at clock 0.
  void RegisterRank(uint32_t rank) {
    testing::RegisterAtZero(*shard, config.job_id, rank);
  }

  proto::PushRequest GoodPush(uint32_t rank, uint64_t clock, float value) {
    return testing::WholePush(*shard, config.job_id, rank, clock, value);
  }

  // The store's version and every chunk, read without a request.
  proto::PullResponse Snapshot() {
    proto::PullResponse resp;
    shard->store().Read(
        [&](uint64_t version, absl::Span<const std::vector<float>> chunks) {
          resp.set_version(version);
          for (const std::vector<float>& c : chunks) {
            resp.add_chunks()->set_data(c.data(), c.size() * sizeof(float));
          }
        });
    return resp;
  }

  JobConfig config;
  std::unique_ptr<Shard> shard;
};

bool SameState(const proto::PullResponse& a, const proto::PullResponse& b) {
  return a.SerializeAsString() == b.SerializeAsString();
}

TEST_CASE("bad pushes are refused, named, and change nothing", "[shard]") {
  Fixture f;
  const proto::PullResponse before = f.Snapshot();
  REQUIRE(before.chunks_size() > 2);

  struct Case {
    const char* what;
    std::function<void(proto::PushRequest&)> corrupt;
    absl::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"wrong job id", [](auto& r) { r.set_job_id("other-job"); },
       absl::StatusCode::kFailedPrecondition, "job_id 'other-job'"},
      {"rank out of range", [](auto& r) { r.set_rank(9); },
       absl::StatusCode::kInvalidArgument, "rank 9"},
      {"missing chunk", [](auto& r) { r.mutable_chunks()->RemoveLast(); },
       absl::StatusCode::kInvalidArgument, "chunks; shard 0 owns"},
      {"wrong tensor size",
       [](auto& r) { r.mutable_chunks(1)->mutable_data()->append("abcd"); },
       absl::StatusCode::kInvalidArgument, "bytes; expected"},
      {"unknown tensor",
       [](auto& r) { r.mutable_chunks(0)->set_tensor_id(77); },
       absl::StatusCode::kInvalidArgument, "of tensor 77 is not owned"},
      {"duplicate chunk", [](auto& r) { *r.mutable_chunks(1) = r.chunks(0); },
       absl::StatusCode::kInvalidArgument, "appears twice"},
      {"wrong dtype",
       [](auto& r) {
         r.mutable_chunks(0)->set_dtype(proto::DTYPE_UNSPECIFIED);
       },
       absl::StatusCode::kInvalidArgument, "expected DTYPE_FLOAT32"},
      {"NaN gradient",
       [](auto& r) {
         const float nan = std::nanf("");
         std::memcpy(r.mutable_chunks(2)->mutable_data()->data() + 8, &nan, 4);
       },
       absl::StatusCode::kInvalidArgument, "is not finite"},
      {"Inf gradient",
       [](auto& r) {
         const float inf = INFINITY;
         std::memcpy(r.mutable_chunks(0)->mutable_data()->data(), &inf, 4);
       },
       absl::StatusCode::kInvalidArgument, "is not finite"},
      {"future clock", [](auto& r) { r.set_clock(3); },
       absl::StatusCode::kFailedPrecondition, "clock 3"},
  };
  for (const Case& c : cases) {
    SECTION(c.what) {
      proto::PushRequest bad = f.GoodPush(0, 0, 0.5f);
      c.corrupt(bad);
      proto::PushResponse resp;
      absl::Status s = f.shard->Push(bad, &resp);
      INFO(s.ToString());
      CHECK(s.code() == c.code);
      CHECK(std::string(s.message()).find(c.says) != std::string::npos);
      CHECK(SameState(f.Snapshot(), before));
      // The round is not poisoned: a good push from each rank still works.
      proto::PushResponse ok;
      REQUIRE(f.shard->Push(f.GoodPush(0, 0, 0.5f), &ok).ok());
      REQUIRE(f.shard->Push(f.GoodPush(1, 0, 0.5f), &ok).ok());
      CHECK(ok.version() == 1);
    }
  }
}

// `push` with every chunk's float32 data turned into float16.
proto::PushRequest ToHalves(proto::PushRequest push) {
  for (proto::TensorChunk& c : *push.mutable_chunks()) {
    const std::string& data = c.data();
    std::vector<float> floats(data.size() / 4);
    std::memcpy(floats.data(), data.data(), data.size());
    std::vector<uint16_t> halves(floats.size());
    FloatsToHalves(floats, absl::MakeSpan(halves));
    c.set_dtype(proto::DTYPE_FLOAT16);
    c.set_data(halves.data(), halves.size() * 2);
  }
  return push;
}

TEST_CASE("float16 pushes apply exactly as float32 pushes of the same values",
          "[shard][fp16]") {
  // 0.375 and -1.25 are exact in half: the two shards must end identical.
  Fixture wide, narrow;
  for (uint64_t clock = 0; clock < 3; ++clock) {
    proto::PushResponse r;
    for (uint32_t rank : {0u, 1u}) {
      const float g = rank == 0 ? 0.375f : -1.25f;
      REQUIRE(wide.shard->Push(wide.GoodPush(rank, clock, g), &r).ok());
      const absl::Status s =
          narrow.shard->Push(ToHalves(narrow.GoodPush(rank, clock, g)), &r);
      INFO(s.ToString());
      REQUIRE(s.ok());
    }
  }
  CHECK(narrow.Snapshot().version() == 3);
  CHECK(SameState(wide.Snapshot(), narrow.Snapshot()));
  // Half the bytes arrived.
  proto::ShardStatus a, b;
  wide.shard->GetStatus(&a);
  narrow.shard->GetStatus(&b);
  CHECK(b.bytes_in() * 2 == a.bytes_in());
  // Before compression: the same float32 bytes for both.
  CHECK(a.bytes_in_float32() == a.bytes_in());
  CHECK(b.bytes_in_float32() == a.bytes_in());
}

TEST_CASE("bad float16 pushes are refused and change nothing",
          "[shard][fp16]") {
  Fixture f;
  const proto::PullResponse before = f.Snapshot();
  proto::PushResponse r;
  proto::PushRequest inf = ToHalves(f.GoodPush(0, 0, 0.5f));
  const uint16_t half_inf = 0x7c00;
  std::memcpy(inf.mutable_chunks(1)->mutable_data()->data() + 6, &half_inf, 2);
  absl::Status s = f.shard->Push(inf, &r);
  CHECK(absl::IsInvalidArgument(s));
  CHECK(absl::StrContains(s.message(), "is not finite"));
  CHECK(absl::StrContains(s.message(), "float16"));
  proto::PushRequest short_chunk = ToHalves(f.GoodPush(0, 0, 0.5f));
  short_chunk.mutable_chunks(0)->mutable_data()->resize(
      short_chunk.chunks(0).data().size() - 2);
  s = f.shard->Push(short_chunk, &r);
  CHECK(absl::IsInvalidArgument(s));
  CHECK(absl::StrContains(s.message(), "bytes of float16"));
  CHECK(SameState(f.Snapshot(), before));
}

TEST_CASE("register checks job, rank and plan; reports the clock", "[shard]") {
  Fixture f;
  proto::RegisterRequest req;
  req.set_job_id(f.config.job_id);
  req.set_rank(1);
  req.set_plan_fingerprint(f.shard->plan().fingerprint());
  proto::RegisterResponse resp;
  REQUIRE(f.shard->Register(req, &resp).ok());
  CHECK(resp.clock() == 0);
  CHECK(resp.shard() == 0);

  req.set_plan_fingerprint(f.shard->plan().fingerprint() + 1);
  absl::Status s = f.shard->Register(req, &resp);
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(std::string(s.message()).find("different job files") !=
        std::string::npos);

  proto::PushResponse pr;
  REQUIRE(f.shard->Push(f.GoodPush(0, 0, 1.0f), &pr).ok());
  REQUIRE(f.shard->Push(f.GoodPush(1, 0, 1.0f), &pr).ok());
  req.set_plan_fingerprint(f.shard->plan().fingerprint());
  REQUIRE(f.shard->Register(req, &resp).ok());
  CHECK(resp.clock() == 1);  // a re-registering worker is proposed this
  req.set_join(true);
  req.set_clock(0);  // the round moved past 0
  CHECK(absl::IsAborted(f.shard->Register(req, &resp)));
  req.set_clock(1);
  REQUIRE(f.shard->Register(req, &resp).ok());
  CHECK(resp.clock() == 1);
}

TEST_CASE("pulls wait for the version their clock needs", "[shard]") {
  Fixture f;
  const proto::PullRequest req = testing::PullAt(f.config.job_id, 0, 1);
  proto::PullResponse resp;
  CHECK(absl::IsDeadlineExceeded(
      testing::PullInto(*f.shard, req, absl::InfinitePast(), nullptr, &resp)));
  proto::PushResponse pr;
  REQUIRE(f.shard->Push(f.GoodPush(0, 0, 1.0f), &pr).ok());
  REQUIRE(f.shard->Push(f.GoodPush(1, 0, 1.0f), &pr).ok());
  REQUIRE(testing::PullInto(*f.shard, req, absl::InfinitePast(), nullptr, &resp)
              .ok());
  CHECK(resp.version() == 1);
  CHECK(resp.chunks_size() ==
        static_cast<int>(f.shard->plan().ChunksOfShard(0).size()));
}

TEST_CASE("a pull may ask for float16; other dtypes are refused",
          "[shard][fp16]") {
  Fixture f;
  proto::PullRequest req = testing::PullAt(f.config.job_id, 0, 0);
  proto::PullResponse wide, narrow;
  REQUIRE(testing::PullInto(*f.shard, req, absl::InfinitePast(), nullptr, &wide)
              .ok());
  req.set_dtype(proto::DTYPE_FLOAT16);
  REQUIRE(
      testing::PullInto(*f.shard, req, absl::InfinitePast(), nullptr, &narrow)
          .ok());
  REQUIRE(narrow.chunks_size() == wide.chunks_size());
  for (int c = 0; c < wide.chunks_size(); ++c) {
    CHECK(narrow.chunks(c).dtype() == proto::DTYPE_FLOAT16);
    const std::string& w = wide.chunks(c).data();
    const std::string& n = narrow.chunks(c).data();
    REQUIRE(n.size() * 2 == w.size());
    for (size_t i = 0; i < n.size() / 2; ++i) {
      float v;
      uint16_t h;
      std::memcpy(&v, w.data() + 4 * i, 4);
      std::memcpy(&h, n.data() + 2 * i, 2);
      REQUIRE(h == FloatToHalf(v));
    }
  }
  proto::ShardStatus st;
  f.shard->GetStatus(&st);
  const uint64_t full = static_cast<uint64_t>(f.shard->store().bytes());
  CHECK(st.bytes_out() == full + full / 2);
  for (int bad : {3, -1}) {
    req.set_dtype(static_cast<proto::DType>(bad));
    const absl::Status s = testing::PullInto(
        *f.shard, req, absl::InfinitePast(), nullptr, &narrow);
    CHECK(absl::IsInvalidArgument(s));
    CHECK(absl::StrContains(s.message(), "Pull: dtype"));
  }
}

// Gives the report 8192-bin test scores: `positives` and `negatives`
// samples, all at p = 0.75 and 0.25.
void Score(proto::ReportEpochRequest& r, int positives, int negatives) {
  r.clear_test_positives_by_score();
  r.clear_test_negatives_by_score();
  for (int b = 0; b < kScoreBins; ++b) {
    r.add_test_positives_by_score(b == ScoreHistogram::BinOf(0.75) ? positives
                                                                   : 0);
    r.add_test_negatives_by_score(b == ScoreHistogram::BinOf(0.25) ? negatives
                                                                   : 0);
  }
  r.set_test_loss_sum(0.3 * (positives + negatives));
}

TEST_CASE("status reports the shard, its workers and the job's epochs",
          "[shard]") {
  Fixture f;
  proto::PushResponse pr;
  REQUIRE(f.shard->Push(f.GoodPush(0, 0, 1.0f), &pr).ok());
  proto::ReportEpochRequest rep;
  rep.set_job_id(f.config.job_id);
  rep.set_epoch(1);
  for (uint32_t rank : {0u, 1u}) {
    rep.set_rank(rank);
    rep.set_train_loss_sum(rank == 0 ? 10.0 : 30.0);
    rep.set_train_samples(10);
    rep.set_train_seconds(rank == 0 ? 1.0 : 2.0);
    rep.set_test_correct(rank == 0 ? 40 : 50);
    rep.set_test_total(50);
    REQUIRE(f.shard->ReportEpoch(rep).ok());
  }
  rep.set_epoch(99);
  CHECK(absl::IsInvalidArgument(f.shard->ReportEpoch(rep)));

  proto::ShardStatus st;
  f.shard->GetStatus(&st);
  CHECK(st.job_id() == "test-job");
  CHECK(st.policy() == "sync");
  CHECK(st.num_shards() == 1);
  CHECK(st.chunks() ==
        static_cast<uint32_t>(f.shard->plan().ChunksOfShard(0).size()));
  CHECK(st.bytes() == static_cast<uint64_t>(f.shard->plan().BytesOnShard(0)));
  CHECK(st.version() == 0);
  REQUIRE(st.workers_size() == 2);
  CHECK(st.workers(0).pushes() == 1);
  CHECK(st.workers(0).clock() == 1);
  CHECK(st.workers(0).bytes_in() == st.bytes());
  CHECK(st.workers(1).pushes() == 0);
  CHECK(st.pushes() == 1);
  REQUIRE(st.epochs_size() == 1);
  const proto::EpochMetrics& e = st.epochs(0);
  CHECK(e.complete());
  CHECK(e.train_loss() == Approx(2.0));           // (10 + 30) / 20
  CHECK(e.test_accuracy() == Approx(0.9));        // 90 / 100
  CHECK(e.samples_per_second() == Approx(10.0));  // 20 samples / 2 s
  CHECK_FALSE(e.test_scored());  // Reports without test scores.
}

TEST_CASE("a binary classifier's test scores give the job's AUC and log loss",
          "[shard]") {
  Fixture f;
  proto::ReportEpochRequest rep;
  rep.set_job_id(f.config.job_id);
  rep.set_epoch(1);
  rep.set_train_samples(10);
  // Rank 0: 3 positives at 0.75, 1 negative at 0.25; rank 1: 1 negative
  // at 0.25. Every pair ordered: AUC 1.
  for (auto [rank, positives, negatives] :
       {std::tuple{0u, 3, 1}, std::tuple{1u, 0, 1}}) {
    rep.set_rank(rank);
    rep.set_test_total(positives + negatives);
    rep.set_test_correct(positives + negatives);
    Score(rep, positives, negatives);
    REQUIRE(f.shard->ReportEpoch(rep).ok());
  }
  proto::ShardStatus st;
  f.shard->GetStatus(&st);
  REQUIRE(st.epochs_size() == 1);
  const proto::EpochMetrics& e = st.epochs(0);
  CHECK(e.test_scored());
  CHECK(e.test_auc() == 1.0);
  CHECK(e.test_auc_error() == 0.0);
  CHECK(e.test_log_loss() == Approx(0.3));
}

TEST_CASE(
    "a repeated epoch report replaces the rank's figures and changes no "
    "parameters (proto: ReportEpoch)",
    "[shard]") {
  Fixture f;
  proto::ReportEpochRequest rep;
  rep.set_job_id(f.config.job_id);
  rep.set_epoch(1);
  rep.set_train_samples(10);
  rep.set_train_seconds(1.0);
  rep.set_test_total(50);
  for (uint32_t rank : {0u, 1u}) {
    rep.set_rank(rank);
    rep.set_train_loss_sum(10.0);
    rep.set_test_correct(25);
    REQUIRE(f.shard->ReportEpoch(rep).ok());
  }
  proto::ShardStatus before;
  f.shard->GetStatus(&before);
  REQUIRE(before.epochs_size() == 1);
  CHECK(before.epochs(0).train_loss() == Approx(1.0));  // 20 / 20
  // Rank 1 again, with other figures: they replace its first report.
  rep.set_train_loss_sum(30.0);
  rep.set_test_correct(45);
  REQUIRE(f.shard->ReportEpoch(rep).ok());
  REQUIRE(f.shard->ReportEpoch(rep).ok());
  proto::ShardStatus after;
  f.shard->GetStatus(&after);
  REQUIRE(after.epochs_size() == 1);
  CHECK(after.epochs(0).train_loss() == Approx(2.0));     // (10 + 30) / 20
  CHECK(after.epochs(0).test_accuracy() == Approx(0.7));  // 70 / 100
  CHECK(after.version() == before.version());
  CHECK(after.pushes() == before.pushes());
}

TEST_CASE("ids from the wire outside the plan are refused, never looked up",
          "[shard]") {
  // tensor_id 2^31 - 1 once overflowed the lookup and crashed the shard.
  Fixture f;
  const proto::PullResponse before = f.Snapshot();
  const uint32_t extremes[] = {0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu};
  for (uint32_t id : extremes) {
    for (bool as_tensor : {true, false}) {
      proto::PushRequest bad = f.GoodPush(0, 0, 0.5f);
      if (as_tensor) {
        bad.mutable_chunks(0)->set_tensor_id(id);
      } else {
        bad.mutable_chunks(0)->set_chunk_index(id);
      }
      proto::PushResponse resp;
      const absl::Status s = f.shard->Push(bad, &resp);
      INFO(s.ToString());
      CHECK(absl::IsInvalidArgument(s));
      CHECK_THAT(std::string(s.message()),
                 Catch::Contains("is not owned by shard 0"));
      CHECK(SameState(f.Snapshot(), before));
    }
  }
}

TEST_CASE("a rank that never registered is refused by every request",
          "[shard]") {
  Fixture f(/*register_ranks=*/false);
  const proto::PullResponse before = f.Snapshot();
  proto::PushResponse push_resp;
  absl::Status s = f.shard->Push(f.GoodPush(1, 0, 0.5f), &push_resp);
  CHECK(absl::IsAborted(s));
  CHECK(s.message() ==
        "Push: rank 1 has not registered with shard 0 (Register with join "
        "first)");
  std::shared_ptr<const ParamSnapshot> snapshot;
  s = f.shard->Pull(testing::PullAt(f.config.job_id, 1, 0),
                    absl::InfiniteFuture(), nullptr, &snapshot);
  CHECK(absl::IsAborted(s));
  CHECK_THAT(std::string(s.message()), Catch::StartsWith("Pull: rank 1"));
  proto::HeartbeatRequest hb;
  hb.set_job_id(f.config.job_id);
  hb.set_rank(1);
  hb.set_finished(true);
  proto::HeartbeatResponse hb_resp;
  s = f.shard->Heartbeat(hb, &hb_resp);
  CHECK(absl::IsAborted(s));
  CHECK_THAT(std::string(s.message()), Catch::StartsWith("Heartbeat: rank 1"));
  proto::ReportEpochRequest rep;
  rep.set_job_id(f.config.job_id);
  rep.set_rank(1);
  rep.set_epoch(1);
  s = f.shard->ReportEpoch(rep);
  CHECK(absl::IsAborted(s));

  // Nothing moved: no clock, no counters, no "finished".
  CHECK(SameState(f.Snapshot(), before));
  proto::ShardStatus st;
  f.shard->GetStatus(&st);
  CHECK(st.workers(1).clock() == 0);
  CHECK(st.workers(1).state() == "waiting");
  CHECK(st.workers(1).pushes() == 0);
  CHECK(st.epochs_size() == 0);
}

TEST_CASE("epoch reports with negative or non-finite figures are refused",
          "[shard]") {
  Fixture f;
  proto::ReportEpochRequest good;
  good.set_job_id(f.config.job_id);
  good.set_rank(0);
  good.set_epoch(1);
  good.set_train_loss_sum(5);
  good.set_train_samples(10);
  good.set_train_seconds(1);
  good.set_test_correct(3);
  good.set_test_total(4);
  struct Case {
    const char* says;
    std::function<void(proto::ReportEpochRequest&)> corrupt;
  };
  const Case cases[] = {
      {"train_seconds -1 must be finite and >= 0",
       [](auto& r) { r.set_train_seconds(-1); }},
      {"train_loss_sum -2 must be finite and >= 0",
       [](auto& r) { r.set_train_loss_sum(-2); }},
      {"train_seconds inf must be finite",
       [](auto& r) { r.set_train_seconds(INFINITY); }},
      {"test_correct 5 is more than test_total 4",
       [](auto& r) { r.set_test_correct(5); }},
      {"epoch 0 is outside [1, 2]", [](auto& r) { r.set_epoch(0); }},
      {"test_loss_sum is set without the test scores",
       [](auto& r) { r.set_test_loss_sum(1.5); }},
      {"test_negatives_by_score holds 0 counts; expected 8192",
       [](auto& r) {
         Score(r, 0, 4);
         r.clear_test_negatives_by_score();
       }},
      {"test_positives_by_score holds 8191 counts",
       [](auto& r) {
         Score(r, 0, 4);
         r.mutable_test_positives_by_score()->RemoveLast();
       }},
      {"the test scores count 5 samples; test_total is 4",
       [](auto& r) { Score(r, 2, 3); }},
      {"test_loss_sum nan must be finite",
       [](auto& r) {
         Score(r, 1, 3);
         r.set_test_loss_sum(NAN);
       }},
  };
  for (const Case& c : cases) {
    proto::ReportEpochRequest bad = good;
    c.corrupt(bad);
    const absl::Status s = f.shard->ReportEpoch(bad);
    INFO(s.ToString());
    CHECK(absl::IsInvalidArgument(s));
    CHECK_THAT(std::string(s.message()), Catch::Contains(c.says));
  }
  proto::ShardStatus st;
  f.shard->GetStatus(&st);
  CHECK(st.epochs_size() == 0);
  REQUIRE(f.shard->ReportEpoch(good).ok());
}

TEST_CASE("client bytes in an error are escaped and cut short", "[shard]") {
  Fixture f;
  proto::HeartbeatRequest hb;
  hb.set_job_id(std::string("evil\0\n\x1b[2J", 10) + std::string(200, 'x'));
  hb.set_rank(0);
  proto::HeartbeatResponse resp;
  const absl::Status s = f.shard->Heartbeat(hb, &resp);
  CHECK(absl::IsFailedPrecondition(s));
  const std::string message(s.message());
  for (char c : message) {
    CHECK(static_cast<unsigned char>(c) >= 0x20);
  }
  CHECK_THAT(message, Catch::Contains("job_id 'evil\\x00\\n\\x1b[2J"));
  CHECK_THAT(message, Catch::Contains("...' does not match"));
  CHECK(message.size() < 250);
}

TEST_CASE("a pull at a past clock is served the newest version, saying so",
          "[shard]") {
  Fixture f;
  proto::PushResponse pr;
  for (uint64_t t = 0; t < 2; ++t) {
    REQUIRE(f.shard->Push(f.GoodPush(0, t, 1.0f), &pr).ok());
    REQUIRE(f.shard->Push(f.GoodPush(1, t, 1.0f), &pr).ok());
  }
  REQUIRE(f.shard->store().version() == 2);
  proto::PullResponse resp;
  REQUIRE(testing::PullInto(*f.shard, testing::PullAt(f.config.job_id, 0, 1),
                            absl::InfinitePast(), nullptr, &resp)
              .ok());
  CHECK(resp.version() == 2);  // as proto/paramd.proto says: never older
}

TEST_CASE("a worker of another launch of the same job is refused", "[shard]") {
  Fixture f(/*register_ranks=*/false);
  f.shard->set_launch("launch-a");
  proto::RegisterRequest req;
  req.set_job_id(f.config.job_id);
  req.set_rank(0);
  req.set_plan_fingerprint(f.shard->plan().fingerprint());
  req.set_launch("launch-b");
  proto::RegisterResponse resp;
  for (bool join : {false, true}) {
    req.set_join(join);
    const absl::Status s = f.shard->Register(req, &resp);
    CHECK(absl::IsFailedPrecondition(s));
    CHECK_THAT(std::string(s.message()),
               Catch::Contains("belongs to launch 'launch-b' but this shard "
                               "serves launch 'launch-a'"));
  }
  proto::ShardStatus st;
  f.shard->GetStatus(&st);
  CHECK_FALSE(st.workers(0).registered());
  req.set_launch("launch-a");
  for (bool join : {false, true}) {
    req.set_join(join);
    REQUIRE(f.shard->Register(req, &resp).ok());
  }
}

TEST_CASE(
    "a rank's calls past limits.max_inflight_per_worker are "
    "RESOURCE_EXHAUSTED and change nothing",
    "[shard][limits]") {
  Fixture f;
  f.config.limits.max_inflight_per_worker = 2;
  f.shard = *Shard::Create(f.config, 0);
  for (uint32_t rank : {0u, 1u}) f.RegisterRank(rank);
  const proto::PullResponse before = f.Snapshot();
  // Two pulls of rank 0 for a version that needs rank 1's push fill it.
  std::vector<std::thread> pulls;
  std::vector<absl::Status> results(2);
  Cancellation give_up;  // The callers' cancel, as gRPC's would be.
  for (int i = 0; i < 2; ++i) {
    pulls.emplace_back([&, i] {
      proto::PullResponse resp;
      results[i] =
          testing::PullInto(*f.shard, testing::PullAt(f.config.job_id, 0, 1),
                            absl::InfiniteFuture(), &give_up, &resp);
    });
  }
  REQUIRE(f.shard->TEST_AwaitWaitingPulls(2, absl::Seconds(30)));
  proto::PullResponse resp;
  absl::Status s =
      testing::PullInto(*f.shard, testing::PullAt(f.config.job_id, 0, 1),
                        absl::InfiniteFuture(), nullptr, &resp);
  CHECK(absl::IsResourceExhausted(s));
  CHECK(s.message() ==
        "Pull: rank 0 already has 2 pushes and pulls in shard 0, the limit "
        "(limits.max_inflight_per_worker is 2)");
  proto::PushResponse pr;
  s = f.shard->Push(f.GoodPush(0, 0, 1.0f), &pr);
  CHECK(absl::IsResourceExhausted(s));
  CHECK_THAT(std::string(s.message()), Catch::StartsWith("Push: rank 0"));
  CHECK(SameState(f.Snapshot(), before));
  proto::ShardStatus st;
  f.shard->GetStatus(&st);
  CHECK(st.pushes() == 0);
  // Another rank has its own allowance; its push does not complete the
  // round (rank 0's was refused), so the pulls still wait.
  REQUIRE(f.shard->Push(f.GoodPush(1, 0, 1.0f), &pr).ok());
  CHECK(SameState(f.Snapshot(), before));
  // Once the waiting pulls give up, their slots are free again.
  give_up.Cancel();
  for (auto& t : pulls) t.join();
  for (const auto& r : results) CHECK(absl::IsCancelled(r));
  CHECK(testing::PullInto(*f.shard, testing::PullAt(f.config.job_id, 0, 0),
                          absl::InfinitePast(), nullptr, &resp)
            .ok());
}

TEST_CASE("a push's staleness counts from the version its rank was served",
          "[shard][staleness]") {
  testing::JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.layers = "[784, 16, 10]";
  o.policy = "async";
  JobConfig config = testing::MakeJob(o, testing::NewTempDir());
  config.policy.staleness_scaling = StalenessScaling::kInverse;
  std::unique_ptr<Shard> shard = *Shard::Create(config, 0);
  for (uint32_t rank : {0u, 1u}) {
    testing::RegisterAtZero(*shard, config.job_id, rank);
  }
  // Rank 0 pulls through the blocking path, rank 1 through the reactor's;
  // both are served version 0.
  proto::PullResponse pulled;
  REQUIRE(testing::PullInto(*shard, testing::PullAt(config.job_id, 0, 0),
                            absl::InfinitePast(), nullptr, &pulled)
              .ok());
  uint64_t served = UINT64_MAX;
  shard->StartPull(testing::PullAt(config.job_id, 1, 0),
                   [&](absl::StatusOr<std::shared_ptr<const ParamSnapshot>> s) {
                     REQUIRE(s.ok());
                     served = (*s)->version;
                   });
  CHECK(served == 0);
  proto::PushResponse pr;
  REQUIRE(
      shard->Push(testing::WholePush(*shard, config.job_id, 1, 0, 1.0f), &pr)
          .ok());
  REQUIRE(
      shard->Push(testing::WholePush(*shard, config.job_id, 0, 0, 1.0f), &pr)
          .ok());
  proto::ShardStatus st;
  shard->GetStatus(&st);
  CHECK(st.staleness_scaling() == "inverse");
  const proto::CountHistogram& h = st.push_staleness();
  CHECK(h.count() == 2);
  CHECK(h.sum() == 3);  // rank 1 fresh (1), rank 0 one version late (2)
  REQUIRE(h.upper_bounds_size() >= 2);
  CHECK(h.upper_bounds(0) == 1);
  CHECK(h.cumulative(0) == 1);
  CHECK(h.cumulative(1) == 2);
  REQUIRE(h.cumulative_size() == h.upper_bounds_size() + 1);
  CHECK(h.cumulative(h.upper_bounds_size()) == 2);
  // By rank.
  CHECK(st.workers(0).mean_push_staleness() == 2);
  CHECK(st.workers(1).mean_push_staleness() == 1);
}

}  // namespace
}  // namespace paramd
