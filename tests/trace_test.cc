// The step timeline end to end over loopback gRPC: two traced steps of a
// 2 servers x 2 workers sync job, merged as paramctl merges them, parse as
// trace-event JSON whose structure holds: every event's phase, events on
// one lane nested or apart, each worker step's phases in order, and each
// server event inside the worker step it serves.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <tuple>

#include "common/trace/trace_events.h"
#include "tests/cluster_training.h"
#include "tests/local_cluster.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using google::protobuf::Value;

struct Event {
  std::string name;
  int pid = 0, tid = 0;
  double ts = 0, dur = 0;
  int64_t clock = -1;
  double end() const { return ts + dur; }
  bool Inside(const Event& outer) const {
    return ts >= outer.ts && end() <= outer.end();
  }
};

double Number(const google::protobuf::Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  REQUIRE(it != s.fields().end());
  REQUIRE(it->second.kind_case() == Value::kNumberValue);
  return it->second.number_value();
}

TEST_CASE("a traced job's merged timeline is valid trace-event JSON",
          "[trace]") {
  const std::string dir = testing::NewTempDir();
  testing::JobOptions o;
  o.epochs = 1;
  o.train_limit = 1024;  // 16 steps of 32 per rank
  o.test_limit = 128;
  JobConfig config = testing::MakeJob(o, dir);
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
  google::protobuf::Struct doc;
  REQUIRE(google::protobuf::util::JsonStringToMessage(*merged, &doc).ok());
  const Value& list = doc.fields().at("traceEvents");
  REQUIRE(list.kind_case() == Value::kListValue);

  std::vector<Event> events;
  std::map<int, std::string> processes;
  for (const Value& v : list.list_value().values()) {
    REQUIRE(v.kind_case() == Value::kStructValue);
    const google::protobuf::Struct& e = v.struct_value();
    const std::string ph = e.fields().at("ph").string_value();
    REQUIRE((ph == "X" || ph == "M"));
    const int pid = static_cast<int>(Number(e, "pid"));
    const google::protobuf::Struct& args = e.fields().at("args").struct_value();
    if (ph == "M") {
      if (e.fields().at("name").string_value() == "process_name") {
        processes[pid] = args.fields().at("name").string_value();
      }
      continue;
    }
    Event x;
    x.name = e.fields().at("name").string_value();
    x.pid = pid;
    x.tid = static_cast<int>(Number(e, "tid"));
    x.ts = Number(e, "ts");
    x.dur = Number(e, "dur");
    CHECK(x.dur >= 0);
    x.clock = static_cast<int64_t>(Number(args, "clock"));
    CHECK((x.clock == 5 || x.clock == 6));  // only the traced steps
    events.push_back(x);
  }
  CHECK(processes == std::map<int, std::string>{{0, "server 0"},
                                                {1, "server 1"},
                                                {1000, "worker 0"},
                                                {1001, "worker 1"}});

  // On one lane, two events are nested or apart, never overlapping.
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
  // step they serve; every shard saw both ranks' both steps.
  int applies = 0, waits = 0;
  for (const Event& e : events) {
    if (e.pid >= TraceEvents::kWorkerPidBase) continue;
    INFO("server " << e.pid << " " << e.name << " rank " << e.tid << " step "
                   << e.clock);
    auto it = worker.find({e.tid, e.clock, "push+pull"});
    REQUIRE(it != worker.end());
    CHECK(e.Inside(it->second));
    // ... and between the start of that shard's call and its reply.
    auto push = calls.find({e.tid, e.pid, e.clock, "push"});
    auto pull = calls.find({e.tid, e.pid, e.clock, "pull"});
    REQUIRE(push != calls.end());
    REQUIRE(pull != calls.end());
    CHECK(push->second.ts <= e.ts);
    CHECK(e.end() <= pull->second.ts);
    applies += e.name == "apply";
    waits += e.name == "wait";
  }
  CHECK(applies == 2 * 2 * 2);  // shards x ranks x steps
  CHECK(waits == 2 * 2 * 2);
}

TEST_CASE("tracing off records and writes nothing", "[trace]") {
  TracingConfig off;
  TraceEvents trace(off, "worker-0", "worker 0", 1000);
  CHECK_FALSE(trace.on());
  CHECK_FALSE(trace.Wants(0));
  trace.Add("step", 0, absl::Now(), absl::Now());
  CHECK(trace.Write().ok());
}

}  // namespace
}  // namespace paramd
