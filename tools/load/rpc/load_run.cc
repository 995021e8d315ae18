#include "tools/load/rpc/load_run.h"

#include <grpcpp/create_channel.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/rpc/grpc_status.h"
#include "proto/paramd.grpc.pb.h"
#include "tools/bench/proc_status.h"
#include "tools/bench/server_processes.h"

namespace paramd {
namespace {

// Counters every worker adds to.
struct Totals {
  std::atomic<int64_t> steps{0};         // Clock >= 1 pushed to every shard.
  std::atomic<int64_t> retries{0};       // Calls sent again.
  std::atomic<int64_t> duplicates{0};    // Retried pushes found applied.
  std::atomic<int64_t> shard_pushes{0};  // Acknowledged pushes, all shards.
};

// Waits until `n` threads arrived.
class Barrier {
 public:
  explicit Barrier(int n) : left_(n) {}
  void ArriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--left_ == 0) {
      done_.notify_all();
      return;
    }
    done_.wait(lock, [this] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  int left_;
};

float Gradient(int rank, uint64_t clock, size_t i) {
  return static_cast<float>(rank + 1) * ((clock + i) % 2 == 0 ? 2.0f : -1.0f);
}

std::string JobYamlText(const LoadOptions& o) {
  std::vector<std::string> servers(o.servers, "\"127.0.0.1:0\"");
  return absl::StrCat(
      "job:\n  id: paramd-load-", o.policy, "\n  seed: 1\n",
      "cluster:\n  servers: [", absl::StrJoin(servers, ", "),
      "]\n  workers: ", o.workers, "\n", "model:\n  type: mlp\n  layers: [",
      absl::StrJoin(o.layers, ", "), "]\n",
      "training:\n  epochs: 1\n  batch_size: 1\n",
      "optimizer:\n  type: sgd\n  learning_rate: 1\n",
      "policy:\n  type: ", o.policy,
      o.policy == "ssp" ? "\n  staleness: 2\n" : "\n",
      "liveness:\n  lease_seconds: 120\n  heartbeat_seconds: 1\n"
      "  stall_warn_seconds: 120\n",
      "partition:\n  chunk_bytes: 65536\n",
      "testing:\n  drop_reply_probability: ", o.drop,
      "\n  delay_reply_ms: ", o.delay_ms, "\n");
}

// One policy's run: servers as child processes, workers as threads.
class LoadRun {
 public:
  LoadRun(LoadOptions options, JobConfig config, PartitionPlan plan)
      : o_(std::move(options)),
        config_(std::move(config)),
        plan_(std::move(plan)),
        start_barrier_(o_.workers) {}

  // Returns whether every check passed.
  bool Run() {
    if (!StartServers()) return false;
    stubs_.resize(o_.workers);
    for (int r = 0; r < o_.workers; ++r) {
      for (const std::string& address : addresses_) {
        grpc::ChannelArguments args;
        args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
        stubs_[r].push_back(
            proto::ParameterService::NewStub(grpc::CreateCustomChannel(
                address, grpc::InsecureChannelCredentials(), args)));
      }
    }
    pushed_.assign(o_.workers, 0);
    errors_.assign(o_.workers, "");
    const absl::Time start = absl::Now();
    end_ = start + absl::Seconds(o_.seconds);
    std::vector<std::thread> threads;
    std::atomic<int> running{o_.workers};
    for (int r = 0; r < o_.workers; ++r) {
      threads.emplace_back([this, r, &running] {
        errors_[r] = Worker(r);
        --running;
      });
    }
    // Keeps the servers' output flowing while the workers run.
    while (running > 0) servers_->Poll(absl::Milliseconds(100));
    for (auto& t : threads) t.join();
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    bool ok = true;
    for (int r = 0; r < o_.workers; ++r) {
      if (!errors_[r].empty()) {
        std::printf("  rank %d failed: %s\n", r, errors_[r].c_str());
        ok = false;
      }
    }
    std::vector<std::string> rss;
    for (int k = 0; k < o_.servers; ++k) {
      rss.push_back(absl::StrFormat(
          "%.1f",
          static_cast<double>(PeakRssBytes(servers_->pid(k))) / (1 << 20)));
    }
    std::printf(
        "%-5s %d workers x %d servers, %.1f s: %lld steps (%.0f/s), %lld "
        "shard pushes (%.0f/s), %lld retries, %lld duplicates acknowledged, "
        "server peak RSS %s MiB\n",
        o_.policy.c_str(), o_.workers, o_.servers, seconds,
        static_cast<long long>(totals_.steps),
        static_cast<double>(totals_.steps) / seconds,
        static_cast<long long>(totals_.shard_pushes),
        static_cast<double>(totals_.shard_pushes) / seconds,
        static_cast<long long>(totals_.retries),
        static_cast<long long>(totals_.duplicates),
        absl::StrJoin(rss, " / ").c_str());
    if (ok) ok = Check();
    servers_.reset();  // Stops them.
    return ok;
  }

 private:
  bool StartServers() {
    absl::StatusOr<std::unique_ptr<ServerProcesses>> servers =
        ServerProcesses::Start(o_.server_binary, config_.path, o_.servers,
                               o_.dir, o_.policy, absl::Seconds(60),
                               &o_.server_hosts);
    if (!servers.ok()) {
      std::printf("  %s\n", std::string(servers.status().message()).c_str());
      return false;
    }
    servers_ = *std::move(servers);
    addresses_ = servers_->addresses();
    if (!o_.server_hosts.hosts.empty()) {
      std::printf("  servers at %s\n", absl::StrJoin(addresses_, ", ").c_str());
    }
    return true;
  }

  // Calls `call` with a fresh context until it is not UNAVAILABLE or
  // DEADLINE_EXCEEDED (at most 100 times), with exponential backoff and
  // jitter.
  template <typename Call>
  grpc::Status WithRetries(std::mt19937& random, Call call) {
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(60));
      grpc::Status s = call(&context);
      const bool transient =
          s.error_code() == grpc::StatusCode::UNAVAILABLE ||
          s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      if (s.ok() || !transient || attempt >= 100) return s;
      ++totals_.retries;
      const int cap_us = std::min(100000, 500 << std::min(attempt, 8));
      std::uniform_int_distribution<int> us(cap_us / 2, cap_us);
      absl::SleepFor(absl::Microseconds(us(random)));
    }
  }

  std::string Failed(const char* what, int shard, const grpc::Status& s) {
    return absl::StrCat(what, " to shard ", shard, ": ", s.error_message(),
                        " (code ", s.error_code(), ")");
  }

  // Registers `rank` with every shard in two phases; returns the clock.
  grpc::Status Register(int rank, uint64_t* clock) {
    *clock = 0;
    for (bool join : {false, true}) {
      for (int k = 0; k < o_.servers; ++k) {
        proto::RegisterRequest request;
        request.set_job_id(config_.job_id);
        request.set_rank(rank);
        request.set_plan_fingerprint(plan_.fingerprint());
        request.set_join(join);
        request.set_clock(*clock);
        proto::RegisterResponse response;
        grpc::ClientContext context;
        grpc::Status s =
            stubs_[rank][k]->Register(&context, request, &response);
        if (!s.ok()) return s;
        if (!join) *clock = std::max(*clock, response.clock());
      }
    }
    return grpc::Status::OK;
  }

  // Pulls shard `k` at `clock` into `out` (chunks concatenated).
  grpc::Status Pull(std::mt19937& random, int rank, int k, uint64_t clock,
                    std::vector<float>* out) {
    proto::PullRequest request;
    request.set_job_id(config_.job_id);
    request.set_rank(rank);
    request.set_clock(clock);
    proto::PullResponse response;
    grpc::Status s = WithRetries(random, [&](grpc::ClientContext* c) {
      return stubs_[rank][k]->Pull(c, request, &response);
    });
    if (!s.ok() || out == nullptr) return s;
    out->clear();
    // The reply's chunks in the plan's order for this shard.
    for (int global : plan_.ChunksOfShard(k)) {
      const ChunkSpec& spec = plan_.chunks()[global];
      for (const proto::TensorChunk& chunk : response.chunks()) {
        if (chunk.tensor_id() != static_cast<uint32_t>(spec.tensor_id) ||
            chunk.chunk_index() != static_cast<uint32_t>(spec.chunk_index)) {
          continue;
        }
        const float* data = reinterpret_cast<const float*>(chunk.data().data());
        out->insert(out->end(), data, data + chunk.data().size() / 4);
      }
    }
    return s;
  }

  // Pushes `values(i)` for every element i of shard `k`.
  template <typename Values>
  grpc::Status Push(std::mt19937& random, int rank, int k, uint64_t clock,
                    Values values) {
    proto::PushRequest request;
    request.set_job_id(config_.job_id);
    request.set_rank(rank);
    request.set_clock(clock);
    size_t i = 0;
    std::vector<float> g;
    for (int global : plan_.ChunksOfShard(k)) {
      const ChunkSpec& spec = plan_.chunks()[global];
      g.resize(spec.length);
      for (auto& v : g) v = values(i++);
      proto::TensorChunk* chunk = request.add_chunks();
      chunk->set_tensor_id(spec.tensor_id);
      chunk->set_chunk_index(spec.chunk_index);
      chunk->set_dtype(proto::DTYPE_FLOAT32);
      chunk->set_data(g.data(), g.size() * sizeof(float));
    }
    proto::PushResponse response;
    int attempts = 0;
    grpc::Status s = WithRetries(random, [&](grpc::ClientContext* c) {
      ++attempts;
      return stubs_[rank][k]->Push(c, request, &response);
    });
    if (s.ok()) {
      ++totals_.shard_pushes;
      if (response.duplicate()) ++totals_.duplicates;
      if (response.duplicate() && attempts == 1) {
        return ToGrpcStatus(
            absl::InternalError("a first attempt was taken for a retry"));
      }
    }
    return s;
  }

  // One worker; returns an error, or "" when it finished.
  std::string Worker(int rank) {
    std::mt19937 random(rank * 7919 + 1);
    uint64_t clock = 0;
    if (grpc::Status s = Register(rank, &clock); !s.ok()) {
      return Failed("Register", 0, s);
    }
    if (clock != 0) return "registered at a clock other than 0";
    // Clock 0: make every parameter 0.
    const bool zeroes = config_.policy.type == PolicyType::kSync || rank == 0;
    for (int k = 0; k < o_.servers; ++k) {
      std::vector<float> initial;
      if (zeroes) {
        if (grpc::Status s = Pull(random, rank, k, 0, &initial); !s.ok()) {
          return Failed("Pull", k, s);
        }
      }
      grpc::Status s = Push(random, rank, k, 0, [&](size_t i) {
        return zeroes ? initial[i] : 0.0f;
      });
      if (!s.ok()) return Failed("Push", k, s);
    }
    start_barrier_.ArriveAndWait();
    for (clock = 1;; ++clock) {
      if (config_.policy.type == PolicyType::kSync) {
        // The first worker past the end fixes the last clock for all: the
        // others are at this clock or have pushed it.
        uint64_t none = UINT64_MAX;
        if (absl::Now() >= end_)
          stop_at_.compare_exchange_strong(none, clock + 1);
        if (clock >= stop_at_) break;
      } else if (absl::Now() >= end_) {
        break;
      }
      for (int k = 0; k < o_.servers; ++k) {
        grpc::Status s = Push(random, rank, k, clock, [&](size_t i) {
          return Gradient(rank, clock, i);
        });
        if (!s.ok()) return Failed("Push", k, s);
      }
      pushed_[rank] = clock;
      ++totals_.steps;
      for (int k = 0; k < o_.servers; ++k) {
        if (grpc::Status s = Pull(random, rank, k, clock + 1, nullptr);
            !s.ok()) {
          return Failed("Pull", k, s);
        }
      }
    }
    // Leaves the live set, so that nobody waits for it.
    for (int k = 0; k < o_.servers; ++k) {
      proto::HeartbeatRequest request;
      request.set_job_id(config_.job_id);
      request.set_rank(rank);
      request.set_clock(clock);
      request.set_finished(true);
      proto::HeartbeatResponse response;
      grpc::ClientContext context;
      grpc::Status s = stubs_[rank][k]->Heartbeat(&context, request, &response);
      if (!s.ok()) return Failed("Heartbeat", k, s);
    }
    return "";
  }

  // Every parameter against the exact expectation; each shard's applied
  // pushes against the acknowledged ones.
  bool Check() {
    // Rank 0 registers again to read the final parameters.
    std::mt19937 random(12345);
    uint64_t clock = 0;
    if (grpc::Status s = Register(0, &clock); !s.ok()) {
      std::printf("  check: %s\n", Failed("Register", 0, s).c_str());
      return false;
    }
    bool ok = true;
    int64_t compared = 0;
    for (int k = 0; k < o_.servers; ++k) {
      std::vector<float> final_params;
      if (grpc::Status s = Pull(random, 0, k, clock, &final_params); !s.ok()) {
        std::printf("  check: %s\n", Failed("Pull", k, s).c_str());
        return false;
      }
      // Gradient(r, c, i) depends on i only through its parity: sum each
      // rank's pushes once per parity.
      double expected_by_parity[2] = {0, 0};
      for (int parity : {0, 1}) {
        for (int r = 0; r < o_.workers; ++r) {
          const uint64_t n = pushed_[r];           // clocks 1..n
          const uint64_t same = (n + parity) / 2;  // c with c + i even
          expected_by_parity[parity] -=
              (r + 1) * (2.0 * same - static_cast<double>(n - same));
        }
        if (config_.policy.type == PolicyType::kSync) {
          expected_by_parity[parity] /= o_.workers;
        }
      }
      int mismatches = 0;
      for (size_t i = 0; i < final_params.size(); ++i) {
        const double expected = expected_by_parity[i % 2];
        if (static_cast<double>(final_params[i]) != expected) {
          if (++mismatches <= 3) {
            std::printf("  shard %d element %zu: %.9g, expected %.9g\n", k, i,
                        final_params[i], expected);
          }
        }
      }
      compared += static_cast<int64_t>(final_params.size());
      if (mismatches > 0) {
        std::printf("  shard %d: %d of %zu parameters differ\n", k, mismatches,
                    final_params.size());
        ok = false;
      }
      // Pushes the shard applied (status) against those acknowledged:
      // clock 0 and 1..pushed_[r] of every rank.
      auto status_stub = proto::StatusService::NewStub(grpc::CreateChannel(
          addresses_[k], grpc::InsecureChannelCredentials()));
      proto::ShardStatus st;
      grpc::ClientContext context;
      if (grpc::Status s =
              status_stub->GetStatus(&context, proto::GetStatusRequest(), &st);
          !s.ok()) {
        std::printf("  check: %s\n", Failed("GetStatus", k, s).c_str());
        return false;
      }
      uint64_t acknowledged = 0;
      for (int r = 0; r < o_.workers; ++r) acknowledged += pushed_[r] + 1;
      if (st.pushes() != acknowledged) {
        std::printf("  shard %d applied %llu pushes; %llu were acknowledged\n",
                    k, static_cast<unsigned long long>(st.pushes()),
                    static_cast<unsigned long long>(acknowledged));
        ok = false;
      }
    }
    std::printf(
        "  exact-sum check: %s (%lld parameters; applied pushes == "
        "acknowledged pushes on every shard: %s)\n",
        ok ? "passed" : "FAILED", static_cast<long long>(compared),
        ok ? "yes" : "see above");
    return ok;
  }

  const LoadOptions o_;
  const JobConfig config_;
  const PartitionPlan plan_;
  std::unique_ptr<ServerProcesses> servers_;
  std::vector<std::string> addresses_;
  std::vector<std::vector<std::unique_ptr<proto::ParameterService::Stub>>>
      stubs_;
  absl::Time end_;
  Barrier start_barrier_;
  std::atomic<uint64_t> stop_at_{UINT64_MAX};
  Totals totals_;
  std::vector<uint64_t> pushed_;  // Each rank's last pushed clock.
  std::vector<std::string> errors_;
};

}  // namespace

std::string LoadJobYaml(const LoadOptions& options) {
  return JobYamlText(options);
}

bool RunLoad(const LoadOptions& options, JobConfig config, PartitionPlan plan) {
  return LoadRun(options, std::move(config), std::move(plan)).Run();
}

}  // namespace paramd
