// Checkpoint files on a real folder, with a file system that fails on
// purpose: torn writes, bad checksums, another job or plan, a full disk and
// a failed rename each give a clear error and never cost an earlier
// checkpoint; deltas restore with their full checkpoint, and a damaged
// delta or full checkpoint under it falls back to an older one.
#include "server/checkpoint/checkpointer.h"

#include <catch2/catch.hpp>
#include <functional>
#include <set>

#include "common/base/crc32.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

// LocalFileSystem, with hooks that fail the next call of a kind.
class FaultyFileSystem final : public FileSystem {
 public:
  std::function<absl::Status(const std::string&, absl::string_view)> on_write;
  std::function<absl::Status(const std::string&, const std::string&)> on_rename;

  absl::Status MakeDirs(const std::string& dir) override {
    return LocalFileSystem()->MakeDirs(dir);
  }
  absl::Status WriteFileSynced(const std::string& path,
                               absl::string_view data) override {
    if (on_write) return on_write(path, data);
    return LocalFileSystem()->WriteFileSynced(path, data);
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (on_rename) return on_rename(from, to);
    return LocalFileSystem()->Rename(from, to);
  }
  absl::Status SyncDir(const std::string& dir) override {
    return LocalFileSystem()->SyncDir(dir);
  }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    return LocalFileSystem()->ReadFile(path);
  }
  absl::StatusOr<std::vector<std::string>> List(
      const std::string& dir) override {
    return LocalFileSystem()->List(dir);
  }
  absl::Status Remove(const std::string& path) override {
    return LocalFileSystem()->Remove(path);
  }
};

CheckpointState State(uint64_t version) {
  CheckpointState s;
  s.job_id = "job-a";
  s.plan_fingerprint = 0x1234;
  s.shard = 1;
  s.policy = "sync";
  s.version = version;
  s.clocks = {version, version + 1};
  s.last_accepted = {static_cast<int64_t>(version) - 1, -1};
  s.store_state = std::string(1000, static_cast<char>('a' + version % 26));
  return s;
}

std::set<std::string> Files(const std::string& dir) {
  auto names = LocalFileSystem()->List(dir);
  REQUIRE(names.ok());
  return {names->begin(), names->end()};
}

std::string Name(uint64_t version, bool delta = false) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "shard-1-v%020llu.%s",
                static_cast<unsigned long long>(version),
                delta ? "delta" : "ckpt");
  return buffer;
}

// A delta at `version` on the full checkpoint at `base`.
CheckpointState Delta(uint64_t version, uint64_t base) {
  CheckpointState s = State(version);
  s.store_state.clear();
  s.incremental = true;
  s.base_version = base;
  s.store_changes = std::string(50, static_cast<char>('A' + version % 26));
  return s;
}

struct Fixture {
  Fixture() : dir(testing::NewTempDir() + "/ckpt"), ckpt(&fs, dir, 1, 3) {}
  void SaveVersions(std::initializer_list<uint64_t> versions) {
    for (uint64_t v : versions) {
      auto path = ckpt.Save(State(v));
      INFO(path.status().ToString());
      REQUIRE(path.ok());
      CHECK(*path == dir + "/" + Name(v));
    }
  }
  // The newest checkpoint, which must be `version`, intact.
  void ExpectNewest(uint64_t version, size_t skipped = 0) {
    auto restored = ckpt.LoadNewest("job-a", 0x1234);
    INFO(restored.status().ToString());
    REQUIRE(restored.ok());
    REQUIRE(restored->state.has_value());
    CHECK(restored->state->version == version);
    CHECK(EncodeCheckpoint(*restored->state) ==
          EncodeCheckpoint(State(version)));
    CHECK(restored->skipped.size() == skipped);
  }
  FaultyFileSystem fs;
  std::string dir;
  Checkpointer ckpt;
};

TEST_CASE("checkpoints round-trip, newest first, keeping the last three",
          "[checkpoint]") {
  Fixture f;
  auto none = f.ckpt.LoadNewest("job-a", 0x1234);
  REQUIRE(none.ok());
  CHECK_FALSE(none->state.has_value());
  f.SaveVersions({100, 200, 300, 400, 500});
  CHECK(Files(f.dir) == std::set<std::string>{Name(300), Name(400), Name(500)});
  f.ExpectNewest(500);
  // Other shards' files in the folder are not this shard's.
  Checkpointer other(&f.fs, f.dir, 2, 3);
  auto empty = other.LoadNewest("job-a", 0x1234);
  REQUIRE(empty.ok());
  CHECK_FALSE(empty->state.has_value());
}

TEST_CASE("rows_applied round-trips, and a checkpoint of format 2 still reads",
          "[checkpoint][table_policy]") {
  CheckpointState s = State(7);
  s.rows_applied = {7, -1};
  absl::StatusOr<CheckpointState> back = DecodeCheckpoint(EncodeCheckpoint(s));
  INFO(back.status().ToString());
  REQUIRE(back.ok());
  CHECK(back->rows_applied == s.rows_applied);
  CHECK(EncodeCheckpoint(*back) == EncodeCheckpoint(s));
  // A count that is neither none nor one per worker is damage.
  s.rows_applied = {7};
  CHECK(absl::IsDataLoss(DecodeCheckpoint(EncodeCheckpoint(s)).status()));

  // The same file as format 2 wrote it: no rows_applied count after the
  // two ranks' clocks (header 8 + 4 format, then shard 4, job 8 + 5, plan
  // 8, policy 8 + 4, version 8, kind 4, base 8, workers 4, clocks 2 * 16).
  const CheckpointState plain = State(7);
  std::string old = EncodeCheckpoint(plain);
  old.resize(old.size() - 4);  // The CRC.
  const size_t count_at = 12 + 4 + 13 + 8 + 12 + 8 + 4 + 8 + 4 + 32;
  REQUIRE(old.substr(count_at, 4) == std::string(4, '\0'));
  old.erase(count_at, 4);
  old[8] = 2;
  const uint32_t crc = Crc32(old);
  for (int i = 0; i < 4; ++i) old.push_back(static_cast<char>(crc >> (8 * i)));
  absl::StatusOr<CheckpointState> two = DecodeCheckpoint(old);
  INFO(two.status().ToString());
  REQUIRE(two.ok());
  CHECK(two->rows_applied.empty());
  CHECK(EncodeCheckpoint(*two) == EncodeCheckpoint(plain));
}

TEST_CASE("a torn or bad-checksum checkpoint is skipped for the one before",
          "[checkpoint]") {
  Fixture f;
  f.SaveVersions({100, 200, 300});
  const std::string newest = f.dir + "/" + Name(300);
  auto bytes = LocalFileSystem()->ReadFile(newest);
  REQUIRE(bytes.ok());
  SECTION("torn: cut short on disk") {
    REQUIRE(LocalFileSystem()
                ->WriteFileSynced(newest, bytes->substr(0, bytes->size() / 2))
                .ok());
  }
  SECTION("a flipped byte") {
    std::string damaged = *bytes;
    damaged[damaged.size() / 2] ^= 0x40;
    REQUIRE(LocalFileSystem()->WriteFileSynced(newest, damaged).ok());
  }
  auto restored = f.ckpt.LoadNewest("job-a", 0x1234);
  REQUIRE(restored.ok());
  REQUIRE(restored->state.has_value());
  CHECK(restored->state->version == 200);
  REQUIRE(restored->skipped.size() == 1);
  CHECK_THAT(restored->skipped[0], Catch::StartsWith(newest + ": ") &&
                                       Catch::Contains("checksum mismatch"));
  // The older ones are untouched.
  CHECK(Files(f.dir).count(Name(100)) == 1);
}

TEST_CASE("a crash while writing leaves the earlier checkpoints whole",
          "[checkpoint]") {
  Fixture f;
  f.SaveVersions({100, 200});
  // The process dies half-way through the temporary file.
  f.fs.on_write = [](const std::string& path, absl::string_view data) {
    (void)LocalFileSystem()->WriteFileSynced(path,
                                             data.substr(0, data.size() / 2));
    return absl::UnavailableError("killed");
  };
  auto s = f.ckpt.Save(State(300));
  CHECK(absl::IsUnavailable(s.status()));
  f.fs.on_write = nullptr;
  CHECK(Files(f.dir) == std::set<std::string>{Name(100), Name(200)});
  f.ExpectNewest(200);
  // A temporary file a crash left behind is never read as a checkpoint.
  REQUIRE(LocalFileSystem()
              ->WriteFileSynced(f.dir + "/" + Name(900) + ".tmp", "partial")
              .ok());
  f.ExpectNewest(200);
}

TEST_CASE("a full disk or a failed rename is a clear error and loses nothing",
          "[checkpoint]") {
  Fixture f;
  f.SaveVersions({100, 200, 300});
  SECTION("full disk") {
    f.fs.on_write = [](const std::string& path, absl::string_view) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot write '", path, "': No space left on device"));
    };
    auto s = f.ckpt.Save(State(400));
    CHECK(absl::IsResourceExhausted(s.status()));
    CHECK_THAT(std::string(s.status().message()),
               Catch::StartsWith("checkpoint of version 400: cannot write") &&
                   Catch::EndsWith("No space left on device"));
  }
  SECTION("failed rename") {
    f.fs.on_rename = [](const std::string& from, const std::string&) {
      return absl::UnavailableError(
          absl::StrCat("cannot rename '", from, "': Input/output error"));
    };
    auto s = f.ckpt.Save(State(400));
    CHECK(absl::IsUnavailable(s.status()));
    CHECK_THAT(std::string(s.status().message()),
               Catch::Contains("Input/output error"));
  }
  // The three earlier checkpoints, and no temporary file.
  CHECK(Files(f.dir) == std::set<std::string>{Name(100), Name(200), Name(300)});
  f.ExpectNewest(300);
}

TEST_CASE("a checkpoint of another job or plan is refused naming both",
          "[checkpoint]") {
  Fixture f;
  f.SaveVersions({100});
  auto job = f.ckpt.LoadNewest("job-b", 0x1234);
  CHECK(absl::IsFailedPrecondition(job.status()));
  CHECK_THAT(std::string(job.status().message()),
             Catch::Contains("is of job 'job-a' with plan fingerprint "
                             "0000000000001234; this shard serves job "
                             "'job-b' with plan fingerprint 0000000000001234"));
  auto plan = f.ckpt.LoadNewest("job-a", 0x99);
  CHECK(absl::IsFailedPrecondition(plan.status()));
  CHECK_THAT(std::string(plan.status().message()),
             Catch::Contains("plan fingerprint 0000000000000099"));
  CHECK(Files(f.dir) == std::set<std::string>{Name(100)});
}

TEST_CASE("checkpoints that are all damaged are an error, not a fresh start",
          "[checkpoint]") {
  Fixture f;
  f.SaveVersions({100, 200});
  for (uint64_t v : {100, 200}) {
    REQUIRE(LocalFileSystem()
                ->WriteFileSynced(f.dir + "/" + Name(v), "PARAMDCK garbage")
                .ok());
  }
  auto restored = f.ckpt.LoadNewest("job-a", 0x1234);
  CHECK(absl::IsDataLoss(restored.status()));
  CHECK_THAT(std::string(restored.status().message()),
             Catch::Contains("every checkpoint of shard 1") &&
                 Catch::Contains("--fresh"));
  REQUIRE(f.ckpt.RemoveAll().ok());
  CHECK(Files(f.dir).empty());
}

TEST_CASE("a delta restores with the full checkpoint it names",
          "[checkpoint][incremental]") {
  Fixture f;
  f.SaveVersions({100});
  for (uint64_t v : {110, 120}) {
    auto path = f.ckpt.Save(Delta(v, 100));
    REQUIRE(path.ok());
    CHECK(*path == f.dir + "/" + Name(v, true));
  }
  auto restored = f.ckpt.LoadNewest("job-a", 0x1234);
  REQUIRE(restored.ok());
  REQUIRE(restored->state.has_value());
  CHECK(restored->path == f.dir + "/" + Name(120, true));
  CHECK(restored->base_path == f.dir + "/" + Name(100));
  CHECK(restored->state->version == 120);
  CHECK(restored->state->incremental);
  CHECK(restored->state->store_changes == Delta(120, 100).store_changes);
  CHECK(restored->state->store_state == State(100).store_state);
  CHECK(restored->state->clocks == State(120).clocks);

  SECTION("a damaged newest delta: the delta before") {
    REQUIRE(LocalFileSystem()
                ->WriteFileSynced(f.dir + "/" + Name(120, true), "PARAMDCK x")
                .ok());
    auto older = f.ckpt.LoadNewest("job-a", 0x1234);
    REQUIRE(older.ok());
    CHECK(older->state->version == 110);
    CHECK(older->skipped.size() == 1);
  }
  SECTION("its full checkpoint damaged: an older full one") {
    f.SaveVersions({200});
    REQUIRE(f.ckpt.Save(Delta(210, 200)).ok());
    REQUIRE(LocalFileSystem()
                ->WriteFileSynced(f.dir + "/" + Name(200), "PARAMDCK x")
                .ok());
    auto older = f.ckpt.LoadNewest("job-a", 0x1234);
    REQUIRE(older.ok());
    // 210 (its full one damaged) and 200 skipped; the newest delta on 100
    // is still kept.
    CHECK(older->state->version == 120);
    CHECK(older->base_path == f.dir + "/" + Name(100));
    REQUIRE(older->skipped.size() == 2);
    CHECK_THAT(older->skipped[0], Catch::Contains("its full checkpoint " +
                                                  f.dir + "/" + Name(200)));
  }
  SECTION("its full checkpoint missing") {
    REQUIRE(LocalFileSystem()->Remove(f.dir + "/" + Name(100)).ok());
    auto none = f.ckpt.LoadNewest("job-a", 0x1234);
    CHECK(absl::IsDataLoss(none.status()));
  }
}

TEST_CASE(
    "the newest three full checkpoints are kept, and three deltas on "
    "them",
    "[checkpoint][incremental]") {
  Fixture f;
  f.SaveVersions({100});
  for (uint64_t v : {110, 120, 130, 140})
    REQUIRE(f.ckpt.Save(Delta(v, 100)).ok());
  CHECK(Files(f.dir) == std::set<std::string>{Name(100), Name(120, true),
                                              Name(130, true),
                                              Name(140, true)});
  f.SaveVersions({200, 300});
  REQUIRE(f.ckpt.Save(Delta(310, 300)).ok());
  CHECK(Files(f.dir) == std::set<std::string>{Name(100), Name(200), Name(300),
                                              Name(130, true), Name(140, true),
                                              Name(310, true)});
  f.SaveVersions({400});
  // The deltas older than the oldest full checkpoint kept go with it.
  CHECK(Files(f.dir) == std::set<std::string>{Name(200), Name(300), Name(400),
                                              Name(310, true)});
  f.ExpectNewest(400);
}

}  // namespace
}  // namespace paramd
