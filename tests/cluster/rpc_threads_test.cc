// The threads of a real paramd-worker on the default step path (StepStream
// steps, no overlap) and of the paramd-server it trains with: none of
// gRPC's callback API. The worker's calls — Register, the first Pull,
// every step, the heartbeats — run on gRPC's async API, polled by the
// thread that waits on them (worker/rpc/step_queue.h); the server's
// calls on its one polling thread (server/rpc/async_calls.h), its unary
// handlers on threads of its own. gRPC 1.51's callback API would start two
// "nexting_thread"s in the process that poll every call's events and hand
// each one over (docs/performance-history.md, "What gRPC's threading costs a
// round trip").
#include <dirent.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(90);

// The names of the threads of process `pid` (/proc/PID/task/*/comm).
std::vector<std::string> ThreadNames(pid_t pid) {
  std::vector<std::string> names;
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream comm(absl::StrCat(tasks, "/", e->d_name, "/comm"));
    std::string name;
    std::getline(comm, name);
    names.push_back(name);
  }
  closedir(dir);
  return names;
}

TEST_CASE(
    "a training paramd-worker and its paramd-server run no gRPC callback "
    "thread",
    "[worker][server][rpc][integration]") {
  const std::string dir = NewTempDir();
  JobOptions o;
  o.servers = {"127.0.0.1:0"};
  o.workers = 2;
  o.epochs = 400;             // outlives the test; killed at its end
  o.heartbeat_seconds = 0.1;  // several heartbeats before the look
  const std::string job = WriteFile(dir + "/job.yaml", JobYaml(o));
  std::string address;
  std::unique_ptr<Subprocess> server = StartServer(job, &address, {}, kTimeout);
  std::unique_ptr<Subprocess> w0 = StartWorker(job, 0, address);
  std::unique_ptr<Subprocess> w1 = StartWorker(job, 1, address);
  // Registered, pulled, stepped through two epochs and heartbeating.
  REQUIRE(w0->ReadUntil("epoch 3/", kTimeout));
  REQUIRE(w1->ReadUntil("epoch 3/", kTimeout));
  for (const Subprocess* p : {w0.get(), w1.get(), server.get()}) {
    const std::vector<std::string> names = ThreadNames(p->pid());
    std::string all;
    for (const std::string& n : names) all += n + ", ";
    INFO((p == server.get() ? "server " : "worker ")
         << p->pid() << " threads: " << all);
    REQUIRE(!names.empty());
    int callback = 0;
    for (const std::string& n : names) callback += n == "nexting_thread";
    CHECK(callback == 0);
  }
}

}  // namespace
}  // namespace paramd::testing
