// A shard's embedding-table rows (server/shard/shard_rows.cc): rows pushed by
// only some workers of a sync round are averaged over the round's pushes,
// as DDP averages; async applies each push at once; malformed row blocks
// and PullRows requests are refused by name and change nothing; a table's
// max_rows is refused with RESOURCE_EXHAUSTED naming table and shard; rows
// survive a checkpoint, full or incremental; eviction sweeps beside the
// pushes, counted in status.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/half.h"
#include "common/metrics/metric_families.h"
#include "common/model/rows.h"
#include "server/checkpoint/file_system.h"
#include "server/shard/shard.h"
#include "server/shard/shard_metrics.h"
#include "tests/row_pushes.h"
#include "tests/test_files.h"
#include "tests/whole_push.h"

namespace paramd {
namespace {

constexpr int kDim = testing::kRowDim;
constexpr float kLr = 0.5f;

using testing::RegisteredShard;
using testing::RowGrad;
using testing::RowPush;
using testing::RowsJob;

using testing::PullTableRows;

std::vector<float> Init(const JobConfig& config, uint64_t id) {
  std::vector<float> row(kDim);
  InitRow(config.model.embeddings[0], config.seed, 0, id, absl::MakeSpan(row));
  return row;
}

TEST_CASE("sync averages rows pushed by some workers over the round",
          "[shard_rows]") {
  const JobConfig config = RowsJob("sync");
  std::unique_ptr<Shard> shard = RegisteredShard(config);
  proto::PushResponse r;
  REQUIRE(shard->Push(RowPush(*shard, config, 0, 0, {3, 10}), &r).ok());
  // The round waits for rank 1: rows of version 1 are not readable yet.
  absl::StatusOr<std::vector<float>> early =
      PullTableRows(*shard, config, 0, 1, {3}, absl::Now());
  CHECK(early.status().code() == absl::StatusCode::kDeadlineExceeded);
  CHECK(shard->store().table(0).rows() == 0);
  REQUIRE(shard->Push(RowPush(*shard, config, 1, 0, {10, 20}), &r).ok());
  CHECK(r.version() == 1);
  CHECK(shard->store().table(0).rows() == 3);

  absl::StatusOr<std::vector<float>> rows =
      PullTableRows(*shard, config, 0, 1, {3, 10, 20, 30});
  REQUIRE(rows.ok());
  for (uint64_t id : {3, 10, 20, 30}) {
    const size_t at = id == 3 ? 0 : id == 10 ? 1 : id == 20 ? 2 : 3;
    const std::vector<float> init = Init(config, id);
    for (int e = 0; e < kDim; ++e) {
      // Sum over the pushes that carried the row, divided by the 2 pushes.
      double sum = 0;
      if (id == 3 || id == 10) sum += RowGrad(0, id, e);
      if (id == 10 || id == 20) sum += RowGrad(1, id, e);
      const float mean = static_cast<float>(sum / 2);
      INFO("row " << id << " element " << e);
      CHECK((*rows)[at * kDim + e] == init[e] - kLr * mean);
    }
  }
  proto::ShardStatus status;
  shard->GetStatus(&status);
  REQUIRE(status.tables_size() == 1);
  CHECK(status.tables(0).name() == "emb");
  CHECK(status.tables(0).rows() == 3);
  CHECK(status.tables(0).rows_pushed() == 4);
  CHECK(status.tables(0).rows_pulled() == 4);
  CHECK(status.tables(0).bytes() > 3 * kDim * 4);
  // And in the Prometheus metrics.
  const std::string metrics = MetricsText(ShardMetrics(*shard, absl::Now()));
  CHECK_THAT(metrics, Catch::Contains("paramd_table_rows{paramd_job=\"test-"
                                      "job\",shard=\"0\",table=\"emb\"} 3\n"));
  CHECK_THAT(metrics,
             Catch::Contains("paramd_table_rows_pushed_total{paramd_job=\"test-"
                             "job\",shard=\"0\",table=\"emb\"} 4\n"));
}

TEST_CASE("async applies each push's rows at once", "[shard_rows]") {
  const JobConfig config = RowsJob("async");
  std::unique_ptr<Shard> shard = RegisteredShard(config);
  proto::PushResponse r;
  REQUIRE(shard->Push(RowPush(*shard, config, 0, 0, {5}), &r).ok());
  absl::StatusOr<std::vector<float>> rows =
      PullTableRows(*shard, config, 0, 1, {5});
  REQUIRE(rows.ok());
  const std::vector<float> init = Init(config, 5);
  for (int e = 0; e < kDim; ++e) {
    CHECK((*rows)[e] == init[e] - kLr * RowGrad(0, 5, e));
  }
  REQUIRE(shard->Push(RowPush(*shard, config, 1, 0, {5}), &r).ok());
  rows = PullTableRows(*shard, config, 1, 1, {5});
  REQUIRE(rows.ok());
  for (int e = 0; e < kDim; ++e) {
    CHECK((*rows)[e] ==
          (init[e] - kLr * RowGrad(0, 5, e)) - kLr * RowGrad(1, 5, e));
  }
  // A retried push is a duplicate: not applied twice.
  REQUIRE(shard->Push(RowPush(*shard, config, 1, 0, {5}), &r).ok());
  CHECK(r.duplicate());
  CHECK(*PullTableRows(*shard, config, 1, 1, {5}) == *rows);
}

TEST_CASE("a table's eviction runs beside the pushes and shows in status",
          "[shard_rows]") {
  const JobConfig config =
      RowsJob("async", 1, "0", "1000", "      eviction: {ttl_steps: 2}\n");
  std::unique_ptr<Shard> shard = RegisteredShard(config);
  const RowEvictor* evictor = shard->store().evictor();
  REQUIRE(evictor != nullptr);
  proto::PushResponse r;
  // Updates 1 and 2: row 5, then rows 6 and 7; each asks for a sweep (every
  // max(1, 2/8) updates).
  REQUIRE(shard->Push(RowPush(*shard, config, 0, 0, {5}), &r).ok());
  REQUIRE(evictor->AwaitSweeps(1, absl::Seconds(30)));
  REQUIRE(shard->Push(RowPush(*shard, config, 0, 1, {6, 7}), &r).ok());
  REQUIRE(evictor->AwaitSweeps(2, absl::Seconds(30)));
  CHECK(shard->store().table(0).rows() == 3);  // Row 5: 1 update ago.
  // Update 3: row 5 was last in update 1, two updates ago.
  REQUIRE(shard->Push(RowPush(*shard, config, 0, 2, {6}), &r).ok());
  REQUIRE(evictor->AwaitSweeps(3, absl::Seconds(30)));
  proto::ShardStatus status;
  shard->GetStatus(&status);
  REQUIRE(status.tables_size() == 1);
  CHECK(status.tables(0).rows() == 2);
  CHECK(status.tables(0).rows_evicted() == 1);
  // Row 5 reads its initial values again.
  CHECK(*PullTableRows(*shard, config, 0, 3, {5}) == Init(config, 5));
  CHECK_THAT(
      MetricsText(ShardMetrics(*shard, absl::Now())),
      Catch::Contains("paramd_table_rows_evicted_total{paramd_job=\"test-"
                      "job\",shard=\"0\",table=\"emb\"} 1\n"));
}

TEST_CASE("rows travel as float16 both ways", "[shard_rows]") {
  const JobConfig config = RowsJob("async");
  std::unique_ptr<Shard> shard = RegisteredShard(config);
  // The float32 push of {5} on one shard, its float16 twin on another.
  std::unique_ptr<Shard> twin = RegisteredShard(config);
  proto::PushRequest wide = RowPush(*shard, config, 0, 0, {5});
  proto::PushRequest narrow = wide;
  std::vector<float> values(kDim);
  std::memcpy(values.data(), wide.rows(0).data().data(), kDim * 4);
  std::vector<uint16_t> halves(kDim);
  FloatsToHalves(values, absl::MakeSpan(halves));  // Exact: k/4 values.
  narrow.mutable_rows(0)->set_dtype(proto::DTYPE_FLOAT16);
  narrow.mutable_rows(0)->set_data(halves.data(), kDim * 2);
  proto::PushResponse r;
  REQUIRE(shard->Push(wide, &r).ok());
  REQUIRE(twin->Push(narrow, &r).ok());
  const std::vector<float> a = *PullTableRows(*shard, config, 0, 1, {5});
  CHECK(*PullTableRows(*twin, config, 0, 1, {5}) == a);
  // Pulled as float16: each value's half.
  proto::PullRowsRequest request;
  request.set_job_id(config.job_id);
  request.set_rank(0);
  request.set_clock(1);
  request.set_ids(EncodeRowIds({5}));
  request.set_dtype(proto::DTYPE_FLOAT16);
  proto::PullRowsResponse response;
  REQUIRE(testing::PullRowsInto(*shard, request, absl::Now() + absl::Seconds(5),
                                nullptr, &response)
              .ok());
  CHECK(response.dtype() == proto::DTYPE_FLOAT16);
  REQUIRE(response.data().size() == kDim * 2);
  std::vector<uint16_t> want(kDim);
  FloatsToHalves(a, absl::MakeSpan(want));
  CHECK(std::memcmp(response.data().data(), want.data(), kDim * 2) == 0);
}

TEST_CASE("malformed row blocks and row pulls are refused by name",
          "[shard_rows]") {
  const JobConfig config = RowsJob("sync", 2);
  std::unique_ptr<Shard> shard = RegisteredShard(config, 0);
  // Ids this shard owns, and one it does not.
  std::vector<uint64_t> mine;
  uint64_t theirs = 0;
  for (uint64_t id = 0; mine.size() < 3 || theirs == 0; ++id) {
    if (RowShard(0, id, 2) == 0) {
      if (mine.size() < 3) mine.push_back(id);
    } else if (theirs == 0) {
      theirs = id;
    }
  }
  struct Case {
    const char* name;
    std::function<void(proto::PushRequest*)> spoil;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"duplicate",
       [&](proto::PushRequest* r) {
         r->mutable_rows(0)->set_ids(EncodeRowIds({mine[0], mine[0]}));
       },
       "duplicate id"},
      {"unsorted",
       [&](proto::PushRequest* r) {
         r->mutable_rows(0)->set_ids(EncodeRowIds({mine[1], mine[0]}));
       },
       "unsorted id"},
      {"out of range",
       [&](proto::PushRequest* r) {
         r->mutable_rows(0)->set_ids(EncodeRowIds({mine[0], 1000}));
       },
       "out of range"},
      {"other shard's",
       [&](proto::PushRequest* r) {
         r->mutable_rows(0)->set_ids(EncodeRowIds({theirs}));
       },
       "belongs to shard 1"},
      {"unknown table",
       [&](proto::PushRequest* r) { r->mutable_rows(0)->set_table(1); },
       "table 1 does not exist"},
      {"short data",
       [&](proto::PushRequest* r) {
         r->mutable_rows(0)->mutable_data()->resize(5);
       },
       "data holds 5 bytes"},
      {"bad dtype",
       [&](proto::PushRequest* r) {
         r->mutable_rows(0)->set_dtype(proto::DType(7));
       },
       "dtype 7"},
      {"not finite",
       [&](proto::PushRequest* r) {
         const float inf = INFINITY;
         std::memcpy(r->mutable_rows(0)->mutable_data()->data() + 4, &inf, 4);
       },
       "not finite"},
      {"two blocks of a table",
       [&](proto::PushRequest* r) { *r->add_rows() = r->rows(0); },
       "a second row block"},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      proto::PushRequest push = RowPush(*shard, config, 0, 0, mine);
      c.spoil(&push);
      proto::PushResponse r;
      const absl::Status s = shard->Push(push, &r);
      INFO(s.message());
      CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CHECK(absl::StrContains(s.message(), "Push"));
      CHECK(absl::StrContains(s.message(), c.says));
      CHECK(shard->store().version() == 0);
      // Nothing was taken: rank 0 can still push its clock 0.
      REQUIRE(shard->Push(RowPush(*shard, config, 0, 0, mine), &r).ok());
      CHECK(!r.duplicate());
    }
  }
  SECTION("PullRows") {
    for (auto [ids, says] :
         {std::pair{EncodeRowIds({mine[1], mine[0]}), "unsorted"},
          std::pair{EncodeRowIds({theirs}), "belongs to shard 1"},
          std::pair{std::string(7, 'x'), "not a whole number"}}) {
      proto::PullRowsRequest request;
      request.set_job_id(config.job_id);
      request.set_rank(0);
      request.set_ids(ids);
      proto::PullRowsResponse response;
      const absl::Status s = testing::PullRowsInto(
          *shard, request, absl::Now() + absl::Seconds(5), nullptr, &response);
      INFO(s.message());
      CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CHECK(absl::StrContains(s.message(), "PullRows"));
      CHECK(absl::StrContains(s.message(), says));
    }
  }
}

TEST_CASE("a table's max_rows is refused cleanly, counting the open round",
          "[shard_rows]") {
  SECTION("sync") {
    const JobConfig config = RowsJob("sync", 1, "5");
    std::unique_ptr<Shard> shard = RegisteredShard(config);
    proto::PushResponse r;
    REQUIRE(shard->Push(RowPush(*shard, config, 0, 0, {1, 2, 3, 4}), &r).ok());
    // 4 new rows are pending in the round; 2 more would make 6.
    absl::Status s = shard->Push(RowPush(*shard, config, 1, 0, {5, 6}), &r);
    INFO(s.message());
    CHECK(s.code() == absl::StatusCode::kResourceExhausted);
    CHECK(absl::StrContains(s.message(), "table 'emb' on shard 0"));
    CHECK(absl::StrContains(s.message(), "max_rows"));
    // Rows the round already has are not new: this one fits.
    REQUIRE(shard->Push(RowPush(*shard, config, 1, 0, {2, 4, 5}), &r).ok());
    CHECK(r.version() == 1);
    CHECK(shard->store().table(0).rows() == 5);
  }
  SECTION("async") {
    const JobConfig config = RowsJob("async", 1, "5");
    std::unique_ptr<Shard> shard = RegisteredShard(config);
    proto::PushResponse r;
    const absl::Status s =
        shard->Push(RowPush(*shard, config, 0, 0, {1, 2, 3, 4, 5, 6}), &r);
    CHECK(s.code() == absl::StatusCode::kResourceExhausted);
    CHECK(shard->store().table(0).rows() == 0);
    CHECK(shard->store().version() == 0);
    REQUIRE(shard->Push(RowPush(*shard, config, 0, 0, {1, 2, 3}), &r).ok());
    CHECK(shard->store().table(0).rows() == 3);
  }
}

TEST_CASE("a PullRows whose reply would pass the message limit is refused",
          "[shard_rows]") {
  const JobConfig config = RowsJob("async", 1, "0", "10000000");
  std::unique_ptr<Shard> shard = RegisteredShard(config);
  // dim 4 × 4 bytes: one id more than 64 MiB holds.
  const uint64_t n = (Shard::kMaxRowMessageBytes / 16) + 1;
  std::vector<uint64_t> ids(n);
  for (uint64_t i = 0; i < n; ++i) ids[i] = i;
  proto::PullRowsRequest request;
  request.set_job_id(config.job_id);
  request.set_rank(0);
  request.set_ids(EncodeRowIds(ids));
  proto::PullRowsResponse response;
  absl::Status s = testing::PullRowsInto(
      *shard, request, absl::Now() + absl::Seconds(30), nullptr, &response);
  INFO(s.message());
  CHECK(s.code() == absl::StatusCode::kResourceExhausted);
  CHECK(absl::StrContains(s.message(), "pull fewer rows per call"));
  // As float16 the same ids fit.
  request.set_dtype(proto::DTYPE_FLOAT16);
  s = testing::PullRowsInto(*shard, request, absl::Now() + absl::Seconds(30),
                            nullptr, &response);
  CHECK(s.ok());
  CHECK(response.data().size() == n * 4 * 2);
}

// Registers both ranks with a restored shard (both phases), which must
// give them `clock`.
void RegisterRestored(Shard& restored, const JobConfig& config,
                      uint64_t clock) {
  for (uint32_t rank : {0u, 1u}) {
    proto::RegisterResponse response;
    for (bool join : {false, true}) {
      proto::RegisterRequest request;
      request.set_job_id(config.job_id);
      request.set_rank(rank);
      request.set_plan_fingerprint(restored.plan().fingerprint());
      request.set_join(join);
      request.set_clock(response.clock());
      REQUIRE(restored.Register(request, &response).ok());
    }
    CHECK(response.clock() == clock);
  }
}

TEST_CASE("rows and their optimizer state survive a checkpoint",
          "[shard_rows]") {
  JobConfig config = RowsJob("sync");
  config.checkpoint.dir = testing::NewTempDir() + "/checkpoints";
  std::vector<float> before;
  {
    std::unique_ptr<Shard> shard = RegisteredShard(config);
    proto::PushResponse r;
    REQUIRE(shard->Push(RowPush(*shard, config, 0, 0, {3, 7}), &r).ok());
    REQUIRE(shard->Push(RowPush(*shard, config, 1, 0, {7, 9}), &r).ok());
    REQUIRE(shard->CheckpointNow().ok());
    before = *PullTableRows(*shard, config, 0, 1, {3, 7, 9});
  }
  std::unique_ptr<Shard> restored = *Shard::Create(config, 0);
  CHECK(restored->store().table(0).rows() == 3);
  CHECK(restored->store().version() == 1);
  RegisterRestored(*restored, config, 1);
  CHECK(*PullTableRows(*restored, config, 0, 1, {3, 7, 9}) == before);
}

TEST_CASE("rows restore from an incremental checkpoint on its full one",
          "[shard_rows][incremental]") {
  JobConfig config = RowsJob("sync");
  config.checkpoint.dir = testing::NewTempDir() + "/checkpoints";
  config.checkpoint.every_steps = 1;
  config.checkpoint.full_every = 3;
  // The ids rounds before `version` pushed, ascending.
  auto held_at = [](uint64_t version) {
    std::vector<uint64_t> held = {5};
    for (uint64_t c = 0; c < version; ++c)
      held.insert(held.end(), {c * 10 + 1, c * 10 + 2});
    std::sort(held.begin(), held.end());
    held.erase(std::unique(held.begin(), held.end()), held.end());
    return held;
  };
  std::vector<std::vector<float>> at;  // By version, from 1.
  {
    std::unique_ptr<Shard> shard = RegisteredShard(config);
    REQUIRE(shard->store().tracks_changes());
    proto::PushResponse r;
    for (uint64_t clock = 0; clock < 6; ++clock) {
      const uint64_t a = clock * 10 + 1, b = clock * 10 + 2;
      REQUIRE(shard->Push(RowPush(*shard, config, 0, clock, {a, b}), &r).ok());
      REQUIRE(shard
                  ->Push(RowPush(*shard, config, 1, clock,
                                 {std::min<uint64_t>(5, b),
                                  std::max<uint64_t>(5, b)}),
                         &r)
                  .ok());
      shard->FlushCheckpoints();  // Each version's capture written.
      at.push_back(
          *PullTableRows(*shard, config, 0, clock + 1, held_at(clock + 1)));
    }
  }
  auto files = LocalFileSystem()->List(config.checkpoint.dir);
  REQUIRE(files.ok());
  std::vector<std::string> names;
  for (const std::string& name : *files) {
    if (absl::StartsWith(name, "shard-0-v")) names.push_back(name.substr(9));
  }
  std::sort(names.begin(), names.end());
  // A full checkpoint at 1 and 4, deltas on them between; of the deltas
  // the newest three (checkpoint.keep) are kept.
  CHECK(names == std::vector<std::string>{
                     "00000000000000000001.ckpt", "00000000000000000003.delta",
                     "00000000000000000004.ckpt", "00000000000000000005.delta",
                     "00000000000000000006.delta"});

  auto restore = [&](uint64_t version) {
    std::unique_ptr<Shard> restored = *Shard::Create(config, 0);
    CHECK(restored->store().version() == version);
    CHECK(restored->store().table(0).rows() == 2 * version + 1);
    proto::ShardStatus st;
    restored->GetStatus(&st);
    CHECK_THAT(st.restored_from(), Catch::EndsWith(".delta"));
    RegisterRestored(*restored, config, version);
    CHECK(*PullTableRows(*restored, config, 0, version, held_at(version)) ==
          at[version - 1]);
  };
  restore(6);
  // The newest delta damaged: the one before, on the same full checkpoint.
  REQUIRE(LocalFileSystem()
              ->WriteFileSynced(config.checkpoint.dir + "/shard-0-v" +
                                    "00000000000000000006.delta",
                                "PARAMDCK damaged")
              .ok());
  restore(5);
}

}  // namespace
}  // namespace paramd
