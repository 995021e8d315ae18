// SharedSegment (common/wire/shared_segment.h): what one side writes in an
// area the other reads; a name that is not a segment's, a file that is not
// there (another host) or whose header lies, refused naming the segment;
// the creator removes its file, and a dead worker's files are swept.
#include "common/wire/shared_segment.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

bool Exists(const std::string& name) {
  struct stat st;
  return stat(absl::StrCat(SharedSegment::Directory(), "/", name).c_str(),
              &st) == 0;
}

TEST_CASE("a segment's areas are shared between its two ends", "[wire][shm]") {
  auto mine = SharedSegment::Create(1000, 100);
  INFO(mine.status().ToString());
  REQUIRE(mine.ok());
  const std::string name = (*mine)->name();
  CHECK(name.rfind(absl::StrCat("paramd-", getpid(), "-"), 0) == 0);
  CHECK((*mine)->push_area().size() == 1024);  // Rounded up to 64.
  CHECK((*mine)->pull_area().size() == 128);
  auto theirs = SharedSegment::Attach(name);
  INFO(theirs.status().ToString());
  REQUIRE(theirs.ok());
  REQUIRE((*theirs)->push_area().size() == 1024);
  std::memcpy((*mine)->push_area().data(), "gradient", 8);
  CHECK(std::memcmp((*theirs)->push_area().data(), "gradient", 8) == 0);
  std::memcpy((*theirs)->pull_area().data(), "params", 6);
  CHECK(std::memcmp((*mine)->pull_area().data(), "params", 6) == 0);
  // The areas do not overlap.
  CHECK((*mine)->push_area().data() + 1024 <= (*mine)->pull_area().data());
  theirs->reset();
  CHECK(Exists(name));  // The server's end leaves the file.
  mine->reset();
  CHECK_FALSE(Exists(name));  // The worker's removes it.
}

TEST_CASE("what is not a segment is refused, naming it", "[wire][shm]") {
  for (const char* bad : {"../etc/passwd", "paramd-1-xyz", "paramd--00",
                          "paramd-12-0123456789ABCDEF", "other"}) {
    auto s = SharedSegment::Attach(bad);
    INFO(bad);
    REQUIRE_FALSE(s.ok());
    CHECK(absl::IsFailedPrecondition(s.status()));
    CHECK_THAT(std::string(s.status().message()),
               Catch::Contains("not a segment's name"));
  }
  // Another host's: no such file here.
  auto absent = SharedSegment::Attach("paramd-1-00000000deadbeef");
  REQUIRE_FALSE(absent.ok());
  CHECK(absl::IsFailedPrecondition(absent.status()));
  CHECK_THAT(std::string(absent.status().message()),
             Catch::Contains("shared memory segment 'paramd-1-00000000deadbeef'"
                             ": cannot open") &&
                 Catch::Contains("another host"));
  // A file of that name whose header is not a segment's.
  const std::string name =
      absl::StrCat("paramd-", getpid(), "-00000000c0ffee00");
  const std::string path = absl::StrCat(SharedSegment::Directory(), "/", name);
  std::ofstream(path) << std::string(4096, 'x');
  auto liar = SharedSegment::Attach(name);
  REQUIRE_FALSE(liar.ok());
  CHECK_THAT(std::string(liar.status().message()),
             Catch::Contains("its header does not describe its areas"));
  std::ofstream(path, std::ios::trunc) << "tiny";
  CHECK_THAT(std::string(SharedSegment::Attach(name).status().message()),
             Catch::Contains("a size of 4 bytes"));
  unlink(path.c_str());
}

TEST_CASE("a dead worker's segments are swept by the next one", "[wire][shm]") {
  // A pid that is not running: a child that has exited and been reaped.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  const std::string stale = absl::StrCat("paramd-", child, "-0000000000000001");
  std::ofstream(absl::StrCat(SharedSegment::Directory(), "/", stale))
      << "left behind";
  REQUIRE(Exists(stale));
  auto fresh = SharedSegment::Create(64, 64);
  REQUIRE(fresh.ok());
  CHECK_FALSE(Exists(stale));
  CHECK(Exists((*fresh)->name()));
}

}  // namespace
}  // namespace paramd
