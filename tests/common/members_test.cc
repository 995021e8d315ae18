// A job's member keys and values in its coordinator (common/coord/members.h):
// written and read back, and what is not a registration refused by key.
#include "common/coord/members.h"

#include <unistd.h>

#include <catch2/catch.hpp>

namespace paramd {
namespace {

TEST_CASE("a member's key and value read back as the member",
          "[coord][members]") {
  JobMember server{"server", 1, "10.0.0.2:47321", "node-a", 4242};
  CHECK(MembersPrefix("mnist") == "/paramd/mnist/members/");
  CHECK(MemberKey("mnist", server) == "/paramd/mnist/members/server/1");
  CHECK(MemberValue(server) == "10.0.0.2:47321 node-a 4242");
  auto back =
      ParseMember("mnist", MemberKey("mnist", server), MemberValue(server));
  REQUIRE(back.ok());
  CHECK(back->kind == "server");
  CHECK(back->id == 1);
  CHECK(back->address == "10.0.0.2:47321");
  CHECK(back->host == "node-a");
  CHECK(back->pid == 4242);

  JobMember worker{"worker", 3, "", "", 7};  // Serves nothing, host unknown.
  CHECK(MemberValue(worker) == "- - 7");
  back = ParseMember("mnist", MemberKey("mnist", worker), MemberValue(worker));
  REQUIRE(back.ok());
  CHECK(back->kind == "worker");
  CHECK(back->id == 3);
  CHECK(back->address == "-");
}

TEST_CASE("this process as a member: its host's name and pid",
          "[coord][members]") {
  const JobMember me = ThisProcess("worker", 2);
  CHECK(me.kind == "worker");
  CHECK(me.id == 2);
  CHECK(me.address == "-");
  CHECK(me.pid == getpid());
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof(host) - 1) == 0);
  CHECK(me.host == host);
}

TEST_CASE("keys and values that are not a registration are named",
          "[coord][members]") {
  struct Case {
    std::string key, value, message;
  };
  const std::vector<Case> cases = {
      {"/paramd/other/members/server/0", "a h 1", "not under /paramd/mnist/"},
      {"/paramd/mnist/members/chief/0", "a h 1", "expected server/K"},
      {"/paramd/mnist/members/server/0/x", "a h 1", "expected server/K"},
      {"/paramd/mnist/members/worker/-1", "a h 1", "'-1' is not a shard"},
      {"/paramd/mnist/members/backup/x", "a h 1", "'x' is not a shard"},
      {"/paramd/mnist/members/backup/0", "a h", "is not \"ADDRESS HOST PID\""},
      {"/paramd/mnist/members/backup/0", "a h p",
       "is not \"ADDRESS HOST PID\""},
  };
  for (const Case& c : cases) {
    INFO(c.key << " = " << c.value);
    auto m = ParseMember("mnist", c.key, c.value);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(m.status().message()),
               Catch::Contains("member key \"" + c.key + "\"") &&
                   Catch::Contains(c.message));
  }
}

}  // namespace
}  // namespace paramd
