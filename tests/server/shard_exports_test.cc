// A shard's exports for serving (ShardExports through Shard::Export): a
// whole export, page by page, holds exactly the rows the shard stores with
// the values its pulls read at that version, and every chunk; an
// incremental one exactly the rows pushed since and the ids eviction
// dropped since; bad requests are refused naming the field.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/model/rows.h"
#include "server/shard/shard.h"
#include "tests/row_pushes.h"

namespace paramd {
namespace {

using testing::kRowDim;
using testing::PullTableRows;
using testing::RegisteredShard;
using testing::RowPush;
using testing::RowsJob;

// An export read whole: rows by id, dropped ids, version, chunks seen.
struct Read {
  uint64_t version = 0;
  uint64_t pages = 0;
  std::map<uint64_t, std::vector<float>> rows;
  std::set<uint64_t> dropped;
  int chunks = 0;
};

absl::StatusOr<Read> ExportAll(Shard& shard, const JobConfig& config,
                               bool incremental = false, uint64_t since = 0,
                               uint32_t page_rows = 2) {
  proto::ExportRequest request;
  request.set_job_id(config.job_id);
  request.set_page_rows(page_rows);
  request.set_incremental(incremental);
  request.set_since_version(since);
  Read read;
  for (uint64_t page = 0; page == 0 || page < read.pages; ++page) {
    absl::StatusOr<proto::ExportResponse> r = shard.Export(request);
    if (!r.ok()) return r.status();
    if (page == 0) {
      read.version = r->version();
      read.pages = r->pages();
      read.chunks = r->chunks_size();
      request = proto::ExportRequest();
      request.set_job_id(config.job_id);
      request.set_export_id(r->export_id());
    } else {
      CHECK(r->chunks_size() == 0);
    }
    request.set_page(page + 1);
    for (const proto::RowBlock& block : r->rows()) {
      std::vector<uint64_t> ids;
      REQUIRE(DecodeRowIds(block.ids(), 1000, "test", &ids).ok());
      REQUIRE(block.data().size() == ids.size() * kRowDim * 4);
      for (size_t i = 0; i < ids.size(); ++i) {
        std::vector<float> row(kRowDim);
        std::memcpy(row.data(), block.data().data() + i * kRowDim * 4,
                    kRowDim * 4);
        CHECK(read.rows.emplace(ids[i], row).second);
      }
    }
    for (const proto::RowBlock& block : r->dropped()) {
      std::vector<uint64_t> ids;
      REQUIRE(DecodeRowIds(block.ids(), 1000, "test", &ids).ok());
      read.dropped.insert(ids.begin(), ids.end());
    }
  }
  return read;
}

// One sync round: both ranks push `ids` (ascending) at `clock`.
void Round(Shard& shard, const JobConfig& config, uint64_t clock,
           const std::vector<uint64_t>& ids) {
  proto::PushResponse r;
  for (uint32_t rank : {0u, 1u}) {
    REQUIRE(shard.Push(RowPush(shard, config, rank, clock, ids), &r).ok());
  }
}

// The rows `ids` as a pull reads them at `clock`.
std::map<uint64_t, std::vector<float>> Pulled(
    Shard& shard, const JobConfig& config, uint64_t clock,
    const std::vector<uint64_t>& ids) {
  absl::StatusOr<std::vector<float>> values =
      PullTableRows(shard, config, 0, clock, ids);
  REQUIRE(values.ok());
  std::map<uint64_t, std::vector<float>> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    out[ids[i]] = std::vector<float>(values->begin() + i * kRowDim,
                                     values->begin() + (i + 1) * kRowDim);
  }
  return out;
}

TEST_CASE(
    "a whole export holds every stored row as pulls read it, page by "
    "page, and an incremental one the rows pushed since",
    "[shard][export]") {
  const JobConfig config = RowsJob("sync");
  std::unique_ptr<Shard> shard = RegisteredShard(config);
  Round(*shard, config, 0, {1, 5, 9});
  Round(*shard, config, 1, {5, 20});
  absl::StatusOr<Read> whole = ExportAll(*shard, config);
  REQUIRE(whole.ok());
  CHECK(whole->version == 2);
  CHECK(whole->pages == 2);  // 4 rows, 2 a page.
  CHECK(whole->chunks == shard->store().num_chunks());
  CHECK(whole->rows == Pulled(*shard, config, 2, {1, 5, 9, 20}));
  CHECK(whole->dropped.empty());

  Round(*shard, config, 2, {9, 33});
  Round(*shard, config, 3, {33, 40});
  absl::StatusOr<Read> changes = ExportAll(*shard, config, true, 2);
  REQUIRE(changes.ok());
  CHECK(changes->version == 4);
  CHECK(changes->chunks == shard->store().num_chunks());
  CHECK(changes->rows == Pulled(*shard, config, 4, {9, 33, 40}));
  // Nothing changed since the last: no rows, and the chunks again.
  absl::StatusOr<Read> none = ExportAll(*shard, config, true, 4);
  REQUIRE(none.ok());
  CHECK(none->rows.empty());
  CHECK(none->pages == 1);
  CHECK(none->chunks == shard->store().num_chunks());
  // Since the first export still works (the last 8 are remembered).
  absl::StatusOr<Read> since_first = ExportAll(*shard, config, true, 2);
  REQUIRE(since_first.ok());
  CHECK(since_first->rows.size() == 3);
}

TEST_CASE("an incremental export names the rows eviction dropped since",
          "[shard][export]") {
  // A capacity of 4 rows: a sweep leaves CapacityTarget(4) = 3 of them.
  const JobConfig config =
      RowsJob("sync", 1, "0", "1000",
              "      eviction: {capacity_rows: 4, policy: lru}\n");
  std::unique_ptr<Shard> shard = RegisteredShard(config);
  Round(*shard, config, 0, {1, 2, 3});
  absl::StatusOr<Read> whole = ExportAll(*shard, config);
  REQUIRE(whole.ok());
  CHECK(whole->rows.size() == 3);
  Round(*shard, config, 1, {4, 5, 6});
  // The evictor sweeps beside the pushes: wait until it has.
  REQUIRE(shard->store().evictor()->AwaitSweeps(1, absl::Seconds(30)));
  absl::StatusOr<Read> changes = ExportAll(*shard, config, true, 1);
  REQUIRE(changes.ok());
  const uint64_t held = shard->store().table(0).rows();
  CHECK(held <= 4);
  // Every row dropped since is named; those held and pushed are there.
  std::set<uint64_t> gone;
  for (uint64_t id : {1, 2, 3, 4, 5, 6}) {
    if (!shard->store().table(0).Holds(id)) gone.insert(id);
  }
  CHECK(!gone.empty());
  CHECK(changes->dropped == gone);
  for (uint64_t id : {4, 5, 6}) {
    CHECK(changes->rows.count(id) == (gone.count(id) == 0 ? 1u : 0u));
  }
}

TEST_CASE("bad export requests are refused naming the field",
          "[shard][export]") {
  const JobConfig config = RowsJob("sync");
  std::unique_ptr<Shard> shard = RegisteredShard(config);
  Round(*shard, config, 0, {1, 2, 3});
  auto refused = [&](const proto::ExportRequest& r, absl::StatusCode code,
                     const std::string& words) {
    absl::StatusOr<proto::ExportResponse> out = shard->Export(r);
    INFO(out.status().ToString());
    CHECK(out.status().code() == code);
    CHECK(absl::StrContains(out.status().message(), words));
  };
  proto::ExportRequest r;
  r.set_job_id("another-job");
  refused(r, absl::StatusCode::kFailedPrecondition,
          "does not match this shard's job");
  r.set_job_id(config.job_id);
  r.set_incremental(true);
  r.set_since_version(1);
  refused(r, absl::StatusCode::kFailedPrecondition,
          "since_version 1 is not an export this shard remembers (none since "
          "it started)");
  r.set_incremental(false);
  refused(r, absl::StatusCode::kInvalidArgument,
          "since_version without incremental");
  r = proto::ExportRequest();
  r.set_job_id(config.job_id);
  r.set_page_rows(2000000);
  refused(r, absl::StatusCode::kInvalidArgument, "page_rows 2000000");
  r.set_page_rows(1);
  absl::StatusOr<proto::ExportResponse> first = shard->Export(r);
  REQUIRE(first.ok());
  CHECK(first->pages() == 3);
  r.set_export_id(first->export_id());
  r.set_page(3);
  refused(r, absl::StatusCode::kInvalidArgument, "page 3 of an export with 3");
  // A newer export replaces it.
  proto::ExportRequest again;
  again.set_job_id(config.job_id);
  REQUIRE(shard->Export(again).ok());
  r.set_page(1);
  refused(r, absl::StatusCode::kNotFound, "is not held");
}

}  // namespace
}  // namespace paramd
