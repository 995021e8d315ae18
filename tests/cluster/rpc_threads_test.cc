// The threads of a real paramd-worker (StepStream steps, with and without
// worker.overlap) and of the paramd-server it trains with: none of gRPC's
// callback API. The worker's calls — Register, the first Pull (a
// PullStream where a shard fills several messages), every step, embedding
// rows, the heartbeats — run on gRPC's async API, polled by the thread
// that waits on them (worker/rpc/step_queue.h); the server's
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

// Runs the job of `o` (one server, two workers; `more_yaml` appended to
// its file) until both workers are in their third epoch, then checks that
// no process runs a callback thread.
void CheckNoCallbackThread(JobOptions o, const std::string& more_yaml = "") {
  const std::string dir = NewTempDir();
  o.servers = {"127.0.0.1:0"};
  o.workers = 2;
  o.epochs = 400;             // outlives the test; killed at its end
  o.heartbeat_seconds = 0.1;  // several heartbeats before the look
  const std::string job = WriteFile(dir + "/job.yaml", JobYaml(o) + more_yaml);
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

TEST_CASE(
    "a training paramd-worker and its paramd-server run no gRPC callback "
    "thread",
    "[worker][server][rpc][integration]") {
  CheckNoCallbackThread(JobOptions());
}

TEST_CASE(
    "nor do workers whose first pull is a PullStream or that pull "
    "embedding rows every step",
    "[worker][server][rpc][integration]") {
  SECTION("a shard of several messages: its first pull is a PullStream") {
    JobOptions o;
    o.layers = "[784, 1024, 10]";  // 3.3 MB on one shard
    o.train_limit = 512;
    o.test_limit = 128;
    CheckNoCallbackThread(o);
  }
  SECTION("embedding rows pulled by id each step (PullRows)") {
    JobOptions o;
    o.model_type = "embedding_bag";
    o.layers = "[8, 16, 10]";
    o.model_extra =
        "  embeddings:\n"
        "    - name: pixels\n"
        "      rows: 1048576\n"
        "      dim: 8\n";
    o.train_limit = 512;
    o.test_limit = 128;
    CheckNoCallbackThread(o);
  }
  SECTION(
      "worker.overlap: each push leaves in pieces as the backward pass "
      "makes them, on the StepStream") {
    JobOptions o;
    o.train_limit = 512;
    o.test_limit = 128;
    CheckNoCallbackThread(o, "worker:\n  overlap: true\n");
  }
}

}  // namespace
}  // namespace paramd::testing
