// ClickLogFile (worker/data/click_log_file.h): a click log's lines as row ids
// and labels, each rank's share (line i to rank i % world) read in order or
// from anywhere, plain or gzip, CRLF or a last line without a newline;
// every malformed line refused when the file opens, naming file and line.
#include "worker/data/click_log_file.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using testing::NewTempDir;
using testing::WriteFile;

constexpr uint64_t kRows = 1000003;
// ClickRow(0, "05db9164", 2^32) as first computed.
constexpr uint64_t kPinnedRow = 346978673;

// Lines "label\tf0-i\tf1-i\tf2-i" for i in [0, n), label i % 3.
std::string Lines(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    absl::StrAppend(&text, i % 3, "\ta", i, "\tb", i % 5, "\t",
                    i % 2 ? "" : "c", "\n");
  }
  return text;
}

std::vector<uint64_t> IdsOf(int i) {
  return {ClickRow(0, absl::StrCat("a", i), kRows),
          ClickRow(1, absl::StrCat("b", i % 5), kRows),
          ClickRow(2, i % 2 ? "" : "c", kRows)};
}

TEST_CASE("a click log's share reads as row ids and labels", "[data][clicks]") {
  const std::string path = WriteFile(NewTempDir() + "/log.tsv", Lines(11));
  for (int world : {1, 3}) {
    for (int rank = 0; rank < world; ++rank) {
      INFO("rank " << rank << " of " << world);
      auto f = ClickLogFile::Open(path, 3, 0, kRows, 0, rank, world);
      INFO(f.status().ToString());
      REQUIRE(f.ok());
      CHECK((*f)->full_size() == 11);
      CHECK((*f)->num_classes() == 3);
      const int64_t size = 11 / world + (rank < 11 % world ? 1 : 0);
      REQUIRE((*f)->size() == size);
      std::vector<uint64_t> ids(3 * size);
      std::vector<int32_t> y(size);
      // In two reads, in order.
      const int half = static_cast<int>(size / 2);
      REQUIRE(*(*f)->Read(0, half, ids.data(), nullptr, y.data()) == half);
      REQUIRE(*(*f)->Read(half, 100, ids.data() + 3 * half, nullptr,
                          y.data() + half) == size - half);
      for (int64_t k = 0; k < size; ++k) {
        const int i = static_cast<int>(k * world + rank);
        CHECK(y[k] == i % 3);
        CHECK(std::vector<uint64_t>(ids.begin() + 3 * k,
                                    ids.begin() + 3 * k + 3) == IdsOf(i));
      }
      // From anywhere: the same samples.
      std::vector<uint64_t> again(3);
      int32_t label = -1;
      REQUIRE(*(*f)->Read(size - 1, 1, again.data(), nullptr, &label) == 1);
      CHECK(again == IdsOf(static_cast<int>((size - 1) * world + rank)));
      REQUIRE(*(*f)->Read(0, 1, again.data(), nullptr, &label) == 1);
      CHECK(again == IdsOf(rank));
      CHECK(*(*f)->Read(size, 4, again.data(), nullptr, &label) == 0);
      CHECK(absl::IsOutOfRange(
          (*f)->Read(size + 1, 1, again.data(), nullptr, &label).status()));
    }
  }
}

TEST_CASE("gzip, CRLF, a last line without a newline and a limit",
          "[data][clicks]") {
  const std::string dir = NewTempDir();
  const std::string gz = dir + "/log.tsv.gz";
  {
    gzFile out = gzopen(gz.c_str(), "wb");
    REQUIRE(out != nullptr);
    const std::string text = Lines(7);
    REQUIRE(gzwrite(out, text.data(), text.size()) ==
            static_cast<int>(text.size()));
    gzclose(out);
  }
  std::string crlf = Lines(7);
  std::string with_cr;
  for (char c : crlf) {
    if (c == '\n') with_cr += '\r';
    with_cr += c;
  }
  with_cr.pop_back();  // No newline after the last line.
  with_cr.pop_back();
  const std::string dos = WriteFile(dir + "/dos.tsv", with_cr);
  for (const std::string& path : {gz, dos}) {
    INFO(path);
    auto f = ClickLogFile::Open(path, 3, 0, kRows, 0, 0, 1);
    INFO(f.status().ToString());
    REQUIRE(f.ok());
    REQUIRE((*f)->size() == 7);
    std::vector<uint64_t> ids(21);
    std::vector<int32_t> y(7);
    REQUIRE(*(*f)->Read(0, 7, ids.data(), nullptr, y.data()) == 7);
    for (int i = 0; i < 7; ++i) {
      CHECK(std::vector<uint64_t>(ids.begin() + 3 * i,
                                  ids.begin() + 3 * i + 3) == IdsOf(i));
    }
  }
  auto limited = ClickLogFile::Open(gz, 3, 0, kRows, 4, 1, 2);
  REQUIRE(limited.ok());
  CHECK((*limited)->full_size() == 4);
  CHECK((*limited)->size() == 2);
}

TEST_CASE("a bad click log is refused naming file and line", "[data][clicks]") {
  const std::string dir = NewTempDir();
  auto error = [&](const std::string& text) {
    const std::string path = WriteFile(dir + "/bad.tsv", text);
    auto f = ClickLogFile::Open(path, 3, 0, kRows, 0, 0, 1);
    return f.ok() ? std::string() : std::string(f.status().message());
  };
  CHECK_THAT(error("1\ta\tb\tc\n0\ta\tb\n"),
             Catch::EndsWith("bad.tsv:2: 2 fields after the label; the "
                             "model's embedding_concat (or features) reads 3"));
  CHECK_THAT(error("1\ta\tb\tc\nyes\ta\tb\tc\n"),
             Catch::EndsWith("bad.tsv:2: the label 'yes' is not a class index "
                             "in [0, 1048576)"));
  CHECK_THAT(error("-1\ta\tb\tc\n"), Catch::Contains("bad.tsv:1: the label"));
  CHECK_THAT(error("1\ta\tb\tc\td\n"),
             Catch::Contains("bad.tsv:1: 4 fields after the label"));
  CHECK_THAT(error(""), Catch::EndsWith("bad.tsv: no samples"));
  CHECK(absl::IsNotFound(
      ClickLogFile::Open(dir + "/missing.tsv", 3, 0, kRows, 0, 0, 1).status()));
  CHECK(absl::IsInvalidArgument(
      ClickLogFile::Open(dir + "/bad.tsv", 3, 0, kRows, 0, 2, 2).status()));
}

TEST_CASE("dense columns before the fields read as log(1 + max(v, 0))",
          "[data][clicks][dense]") {
  const std::string dir = NewTempDir();
  // The Criteo layout's shape: a label, dense values (one missing, one
  // negative, one decimal), then the tokens.
  const std::string path = WriteFile(
      dir + "/dense.tsv", "1\t5\t\t-3\ta1\tb\t\n0\t0\t2.5\t1e3\ta2\tb\tc\n");
  auto f = ClickLogFile::Open(path, 3, 3, kRows, 0, 0, 1);
  INFO(f.status().ToString());
  REQUIRE(f.ok());
  CHECK((*f)->dense() == 3);
  std::vector<uint64_t> ids(6);
  std::vector<float> dense(6, -1.0f);
  std::vector<int32_t> y(2);
  REQUIRE(*(*f)->Read(0, 2, ids.data(), dense.data(), y.data()) == 2);
  CHECK(y == std::vector<int32_t>{1, 0});
  const std::vector<float> expected = {static_cast<float>(std::log1p(5.0)),
                                       0.0f,
                                       0.0f,
                                       0.0f,
                                       static_cast<float>(std::log1p(2.5)),
                                       static_cast<float>(std::log1p(1e3))};
  CHECK(dense == expected);
  CHECK(ids[0] == ClickRow(0, "a1", kRows));
  CHECK(ids[5] == ClickRow(2, "c", kRows));

  auto error = [&](const std::string& text) {
    const std::string bad = WriteFile(dir + "/bad.tsv", text);
    auto g = ClickLogFile::Open(bad, 3, 3, kRows, 0, 0, 1);
    return g.ok() ? std::string() : std::string(g.status().message());
  };
  CHECK_THAT(error("1\t5\tx\t3\ta\tb\tc\n"),
             Catch::EndsWith("bad.tsv:1: dense feature 2 'x' is not a number"));
  CHECK_THAT(error("1\t5\tnan\t3\ta\tb\tc\n"),
             Catch::Contains("dense feature 2 'nan' is not a number"));
  CHECK_THAT(error("1\t5\t3\t4\ta\tb\n"),
             Catch::EndsWith("bad.tsv:1: 5 columns after the label; the "
                             "model's embedding_concat reads 3 dense values "
                             "and 3 fields"));
}

TEST_CASE("a token's row depends on its field and stays put",
          "[data][clicks]") {
  CHECK(ClickRow(0, "05db9164", kRows) != ClickRow(1, "05db9164", kRows));
  CHECK(ClickRow(0, "05db9164", kRows) == ClickRow(0, "05db9164", kRows));
  CHECK(ClickRow(3, "", kRows) < kRows);
  // Pinned: processes of different builds must agree on every row.
  CHECK(ClickRow(0, "05db9164", uint64_t{1} << 32) == kPinnedRow);
}

}  // namespace
}  // namespace paramd
