// The step timeline end to end over loopback gRPC: two traced steps of a
// 2 servers x 2 workers sync job, merged as paramctl merges them, parse as
// trace-event JSON whose structure holds: every event's phase, events on
// one lane nested or apart, each worker step's phases in order, and each
// server event inside the worker step it serves.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <tuple>

#include "common/trace/trace_events.h"
#include "server/stats/shard_trace.h"
#include "tests/cluster_training.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"
#include "tests/trace_reader.h"

namespace paramd {
namespace {

using Event = testing::TraceEvent;

// On one lane, two events are nested or apart, never overlapping.
void CheckLanesNest(const std::vector<Event>& events) {
  std::map<std::pair<int, int>, std::vector<Event>> lanes;
  for (const Event& e : events) lanes[{e.pid, e.tid}].push_back(e);
  for (const auto& [lane, list] : lanes) {
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t j = i + 1; j < list.size(); ++j) {
        const Event& a = list[i];
        const Event& b = list[j];
        INFO(a.name << "@" << a.clock << " and " << b.name << "@" << b.clock);
        CHECK(
            (a.end() <= b.ts || b.end() <= a.ts || a.Inside(b) || b.Inside(a)));
      }
    }
  }
}

// Steps 5 and 6 of a 2 x 2 job (`overlap`: worker.overlap), merged.
testing::TraceDocument TraceTwoSteps(bool overlap) {
  const std::string dir = testing::NewTempDir();
  testing::JobOptions o;
  o.epochs = 1;
  o.train_limit = 1024;  // 16 steps of 32 per rank
  o.test_limit = 128;
  JobConfig config = testing::MakeJob(o, dir);
  config.worker.overlap = overlap;
  config.tracing.dir = dir + "/trace";
  config.tracing.from_step = 5;
  config.tracing.steps = 2;
  {
    testing::LocalCluster cluster(config);
    testing::Observed observed;
    testing::TrainAll(config, cluster, observed);
    for (int s = 0; s < 2; ++s) cluster.server(s).shard()->Shutdown();
  }
  absl::StatusOr<std::string> merged = TraceEvents::Merge(config.tracing.dir);
  REQUIRE(merged.ok());
  absl::StatusOr<testing::TraceDocument> doc = testing::ReadTrace(*merged);
  INFO(doc.status().message());
  REQUIRE(doc.ok());
  for (const Event& x : doc->events) {
    CHECK((x.clock == 5 || x.clock == 6));  // only the traced steps
  }
  CHECK(doc->processes == std::map<int, std::string>{{0, "server 0"},
                                                     {1, "server 1"},
                                                     {1000, "worker 0"},
                                                     {1001, "worker 1"}});
  CheckLanesNest(doc->events);
  return *std::move(doc);
}

TEST_CASE("an overlapped step's exchange has a lane of its own", "[trace]") {
  const testing::TraceDocument doc = TraceTwoSteps(/*overlap=*/true);
  std::map<std::tuple<int, int, int64_t, std::string>, Event> worker;
  for (const Event& e : doc.events) {
    if (e.pid < TraceEvents::kWorkerPidBase) continue;
    CHECK(worker
              .emplace(std::make_tuple(e.pid - TraceEvents::kWorkerPidBase,
                                       e.tid, e.clock, e.name),
                       e)
              .second);
  }
  const int exchanges = 3;  // after the two shards' lanes
  for (int rank = 0; rank < 2; ++rank) {
    for (int64_t clock : {5, 6}) {
      INFO("rank " << rank << " step " << clock);
      auto at = [&](int lane, const std::string& name) {
        auto it = worker.find({rank, lane, clock, name});
        REQUIRE(it != worker.end());
        return it->second;
      };
      const Event step = at(0, "step");
      const Event data = at(0, "data");
      const Event compute = at(0, "forward+backward");
      const Event exchange = at(exchanges, "push+pull");
      CHECK(data.Inside(step));
      CHECK(compute.Inside(step));
      CHECK(data.end() <= compute.ts);
      // It starts while the backward pass runs and may end in the next
      // step.
      CHECK(compute.ts <= exchange.ts);
      CHECK(exchange.ts <= step.end());
    }
  }
  // Each server event lies inside the exchange of the step it serves.
  std::set<std::tuple<int, int, int64_t, std::string>> served;
  for (const Event& e : doc.events) {
    if (e.pid >= TraceEvents::kWorkerPidBase) continue;
    // Applies and waits (a step and its chunks lie inside an apply). The
    // pieces go by the socket as a push in slices: an apply and a wait
    // for each.
    if (e.name != "apply" && e.name != "wait") continue;
    INFO("server " << e.pid << " " << e.name << " rank " << e.rank << " step "
                   << e.clock);
    auto it = worker.find({e.rank, exchanges, e.clock, "push+pull"});
    REQUIRE(it != worker.end());
    CHECK(e.Inside(it->second));
    served.insert({e.pid, e.rank, e.clock, e.name});
  }
  CHECK(served.size() == 2 * 2 * 2 * 2);  // shards x ranks x steps x kinds
}

TEST_CASE("a traced job's merged timeline is valid trace-event JSON",
          "[trace]") {
  const testing::TraceDocument doc = TraceTwoSteps(/*overlap=*/false);
  const std::vector<Event>& events = doc.events;

  // Each worker's steps: data, forward+backward, push+pull in that order,
  // inside the step; on each shard's lane (tid 1 + shard) push, wait, pull
  // in that order inside push+pull.
  std::map<std::tuple<int, int64_t, std::string>, Event> worker;
  std::map<std::tuple<int, int, int64_t, std::string>, Event> calls;
  for (const Event& e : events) {
    if (e.pid < TraceEvents::kWorkerPidBase) continue;
    const int rank = e.pid - TraceEvents::kWorkerPidBase;
    if (e.tid == 0) {
      CHECK(worker.emplace(std::make_tuple(rank, e.clock, e.name), e).second);
    } else {
      CHECK(calls.emplace(std::make_tuple(rank, e.tid - 1, e.clock, e.name), e)
                .second);
    }
  }
  CHECK(calls.size() == 2 * 2 * 2 * 3);  // ranks x shards x steps x phases
  for (int rank = 0; rank < 2; ++rank) {
    for (int64_t clock : {5, 6}) {
      INFO("rank " << rank << " step " << clock);
      auto at = [&](const std::string& name) {
        auto it = worker.find({rank, clock, name});
        REQUIRE(it != worker.end());
        return it->second;
      };
      const Event step = at("step");
      const Event data = at("data");
      const Event compute = at("forward+backward");
      const Event exchange = at("push+pull");
      CHECK(data.Inside(step));
      CHECK(compute.Inside(step));
      CHECK(exchange.Inside(step));
      CHECK(data.end() <= compute.ts);
      CHECK(compute.end() <= exchange.ts);
      // The CPU layer graph says where its forward pass ended.
      const Event forward = at("forward");
      const Event backward = at("backward");
      CHECK(forward.Inside(compute));
      CHECK(backward.Inside(compute));
      CHECK(forward.end() <= backward.ts);
      for (int shard = 0; shard < 2; ++shard) {
        INFO("shard " << shard);
        auto call = [&](const std::string& name) {
          auto it = calls.find({rank, shard, clock, name});
          REQUIRE(it != calls.end());
          return it->second;
        };
        const Event push = call("push");
        const Event wait = call("wait");
        const Event pull = call("pull");
        CHECK(push.Inside(exchange));
        CHECK(wait.Inside(exchange));
        CHECK(pull.Inside(exchange));
        CHECK(push.end() <= wait.ts);
        CHECK(wait.end() <= pull.ts);
      }
    }
  }
  // Each server's apply and wait lie inside the push+pull of the rank's
  // step they serve, and its reply follows the wait (its write may be
  // reported done after the worker has the bytes); every shard saw both
  // ranks' both steps.
  int applies = 0, waits = 0, replies = 0;
  std::map<std::tuple<int, int, int64_t>, Event> server_waits;
  for (const Event& e : events) {
    if (e.pid < TraceEvents::kWorkerPidBase && e.name == "wait") {
      server_waits[{e.pid, e.rank, e.clock}] = e;
    }
  }
  for (const Event& e : events) {
    if (e.pid >= TraceEvents::kWorkerPidBase) continue;
    INFO("server " << e.pid << " " << e.name << " rank " << e.rank << " step "
                   << e.clock);
    // Pushes on lane rank, pulls on lane workers + rank.
    const bool pulls = e.name == "wait" || e.name == "reply";
    CHECK(e.tid == (pulls ? 2 + e.rank : e.rank));
    auto it = worker.find({e.rank, e.clock, "push+pull"});
    REQUIRE(it != worker.end());
    if (e.name == "step" || e.name == "copy" || e.name == "chunk") {
      continue;  // Inside an apply (below).
    }
    if (e.name == "reply") {
      ++replies;
      auto wait = server_waits.find({e.pid, e.rank, e.clock});
      REQUIRE(wait != server_waits.end());
      CHECK(wait->second.end() <= e.ts);
      CHECK(e.ts <= it->second.end());
      continue;
    }
    CHECK(e.Inside(it->second));
    // ... and between the start of that shard's call and its reply.
    auto push = calls.find({e.rank, e.pid, e.clock, "push"});
    auto pull = calls.find({e.rank, e.pid, e.clock, "pull"});
    REQUIRE(push != calls.end());
    REQUIRE(pull != calls.end());
    CHECK(push->second.ts <= e.ts);
    CHECK(e.end() <= pull->second.ts);
    applies += e.name == "apply";
    waits += e.name == "wait";
  }
  CHECK(applies == 2 * 2 * 2);  // shards x ranks x steps
  CHECK(waits == 2 * 2 * 2);
  CHECK(replies == 2 * 2 * 2);

  // Each round's optimizer step, once per shard and clock, inside the
  // apply of the push that completed the round, chunk by chunk in order.
  std::map<std::pair<int, int64_t>, std::vector<Event>> steps, chunks;
  std::map<std::tuple<int, int, int64_t>, Event> applied;
  for (const Event& e : events) {
    if (e.pid >= TraceEvents::kWorkerPidBase) continue;
    if (e.name == "step") steps[{e.pid, e.clock}].push_back(e);
    if (e.name == "chunk") chunks[{e.pid, e.clock}].push_back(e);
    if (e.name == "apply") applied[{e.pid, e.rank, e.clock}] = e;
  }
  CHECK(steps.size() == 2 * 2);  // shards x steps
  for (const auto& [at, list] : steps) {
    INFO("shard " << at.first << " step " << at.second);
    REQUIRE(list.size() == 1);
    const Event& step = list[0];
    auto apply = applied.find({at.first, step.rank, at.second});
    REQUIRE(apply != applied.end());
    CHECK(step.Inside(apply->second));
    const std::vector<Event>& parts = chunks[at];
    CHECK(!parts.empty());
    for (size_t i = 0; i < parts.size(); ++i) {
      CHECK(parts[i].Inside(step));
      if (i > 0) CHECK(parts[i - 1].end() <= parts[i].ts);
    }
    // The same chunks each step.
    const size_t first = chunks[{at.first, 5}].size();
    CHECK(parts.size() == first);
  }
}

TEST_CASE("tracing off records and writes nothing", "[trace]") {
  TracingConfig off;
  TraceEvents trace(off, "worker-0", "worker 0", 1000);
  CHECK_FALSE(trace.on());
  CHECK_FALSE(trace.Wants(0));
  trace.Add("step", 0, absl::Now(), absl::Now());
  CHECK(trace.Write().ok());
}

TEST_CASE("a window armed on a running process is recorded and written once",
          "[trace]") {
  const std::string dir = testing::NewTempDir();
  TracingConfig off;
  TraceEvents trace(off, "worker-0", "worker 0", 1000);
  trace.NameThread(0, "steps");  // named while off: kept for the window
  CHECK_FALSE(trace.on());
  TracingConfig window;
  window.dir = dir + "/live";
  window.from_step = 10;
  window.steps = 2;
  CHECK(trace.Arm(window));
  CHECK_FALSE(trace.Arm(window));  // the same window again: no change
  CHECK_FALSE(trace.Wants(9));
  CHECK(trace.Wants(10));
  CHECK(trace.Wants(11));
  CHECK_FALSE(trace.Wants(12));
  CHECK_FALSE(trace.TakeDone(11));
  trace.Add("step", 0, absl::Now(), absl::Now(), "\"clock\":10");
  CHECK(trace.TakeDone(12));
  CHECK_FALSE(trace.TakeDone(13));  // once per window
  absl::StatusOr<std::string> path = trace.Write();
  REQUIRE(path.ok());
  CHECK(*path == window.dir + "/worker-0.jsonl");
  absl::StatusOr<std::string> merged = TraceEvents::Merge(window.dir);
  REQUIRE(merged.ok());
  absl::StatusOr<testing::TraceDocument> doc = testing::ReadTrace(*merged);
  REQUIRE(doc.ok());
  REQUIRE(doc->events.size() == 1);
  CHECK(doc->events[0].clock == 10);
  CHECK(merged->find("\"thread_name\"") != std::string::npos);
}

TEST_CASE("a shard's Trace requests are checked field by field", "[trace]") {
  const std::string dir = testing::NewTempDir();
  testing::JobOptions o;
  JobConfig config = testing::MakeJob(o, dir);
  ShardTrace trace(config, 0);
  proto::TraceRequest request;
  auto refused = [&](absl::StatusCode code, const std::string& field) {
    absl::StatusOr<proto::TraceResponse> r = trace.Serve(request);
    INFO(r.status().ToString());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == code);
    CHECK(r.status().message().find(field) != absl::string_view::npos);
  };
  refused(absl::StatusCode::kInvalidArgument, "neither window nor write");
  request.set_write(true);
  refused(absl::StatusCode::kFailedPrecondition, "TraceRequest.write");
  request.set_write(false);
  request.mutable_window()->set_dir("relative/trace");
  request.mutable_window()->set_steps(3);
  refused(absl::StatusCode::kInvalidArgument, "TraceRequest.window.dir");
  request.mutable_window()->set_dir(dir + "/live");
  request.mutable_window()->set_steps(0);
  refused(absl::StatusCode::kInvalidArgument, "TraceRequest.window.steps");

  // Nothing armed: heartbeats carry no window.
  proto::HeartbeatResponse beat;
  trace.FillHeartbeat(0, &beat);
  CHECK_FALSE(beat.has_trace());

  request.mutable_window()->set_steps(3);
  request.mutable_window()->set_from_step(7);
  absl::StatusOr<proto::TraceResponse> armed = trace.Serve(request);
  REQUIRE(armed.ok());
  CHECK(armed->window().from_step() == 7);
  // A rank before the window's end hears of it; one past it does not.
  trace.FillHeartbeat(9, &beat);
  REQUIRE(beat.has_trace());
  CHECK(beat.trace().dir() == dir + "/live");
  CHECK(beat.trace().from_step() == 7);
  CHECK(beat.trace().steps() == 3);
  proto::HeartbeatResponse late;
  trace.FillHeartbeat(10, &late);
  CHECK_FALSE(late.has_trace());

  trace.Push(1, 8, absl::Now(), absl::Now(), 9, 64, false, 1);
  trace.Push(1, 10, absl::Now(), absl::Now(), 11, 64, false, 1);  // past it
  proto::TraceRequest write;
  write.set_write(true);
  absl::StatusOr<proto::TraceResponse> written = trace.Serve(write);
  REQUIRE(written.ok());
  CHECK(written->path() == dir + "/live/server-0.jsonl");
  CHECK(written->events() == 1);
}

}  // namespace
}  // namespace paramd
