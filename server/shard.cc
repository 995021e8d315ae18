#include "server/shard.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

// Checks every element is finite; returns the first bad index or -1.
int64_t FirstNonFinite(absl::Span<const float> values) {
  // A float is NaN or infinite exactly when its exponent bits are all
  // ones. The integer test vectorises (a float compare would not, under
  // strict floating point); only when it fires is the index looked up.
  constexpr uint32_t kExponent = 0x7F800000u;
  uint32_t any = 0;
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    any |= static_cast<uint32_t>((bits & kExponent) == kExponent);
  }
  if (any == 0) return -1;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(const JobConfig& config,
                                                     int shard_id) {
  if (shard_id < 0 || shard_id >= config.num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard: ", shard_id, " is outside [0, ",
                     config.num_shards(), ") for the ", config.num_shards(),
                     " servers in ", config.path));
  }
  ModelSpec spec = BuildModelSpec(config.model);
  absl::StatusOr<PartitionPlan> plan =
      PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards());
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer =
      MakeOptimizer(config.optimizer);
  if (!optimizer.ok()) return optimizer.status();
  return std::unique_ptr<Shard>(new Shard(config, shard_id, std::move(spec),
                                          *std::move(plan),
                                          *std::move(optimizer)));
}

Shard::Shard(const JobConfig& config, int shard_id, ModelSpec spec,
             PartitionPlan plan, std::unique_ptr<Optimizer> optimizer)
    : config_(config),
      shard_id_(shard_id),
      spec_(std::move(spec)),
      plan_(std::move(plan)),
      started_(absl::Now()),
      store_(spec_, plan_, shard_id, config.seed, std::move(optimizer)),
      policy_(MakeUpdatePolicy(config.policy, config.num_workers, &store_)),
      workers_(config.num_workers),
      metrics_(config.num_workers) {}

int64_t Shard::max_message_bytes() const {
  // Every chunk plus generous framing; at least 4 MiB.
  return std::max<int64_t>(4 << 20, store_.bytes() + 64 * store_.num_chunks() +
                                        (1 << 20));
}

absl::Status Shard::CheckWorker(const char* rpc, const std::string& job_id,
                                uint32_t rank) const {
  if (job_id != config_.job_id) {
    return absl::FailedPreconditionError(
        absl::StrCat(rpc, ": job_id '", job_id, "' does not match this shard's job '",
                     config_.job_id, "'"));
  }
  if (rank >= static_cast<uint32_t>(config_.num_workers)) {
    return absl::InvalidArgumentError(
        absl::StrCat(rpc, ": rank ", rank, " is outside [0, ",
                     config_.num_workers, ")"));
  }
  return absl::OkStatus();
}

absl::Status Shard::Register(const proto::RegisterRequest& request,
                             proto::RegisterResponse* response) {
  if (auto s = CheckWorker("Register", request.job_id(), request.rank());
      !s.ok()) {
    return s;
  }
  if (request.plan_fingerprint() != plan_.fingerprint()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Register: rank ", request.rank(),
        " computed a different partition plan (fingerprint ",
        request.plan_fingerprint(), ", shard has ", plan_.fingerprint(),
        "): the worker and server read different job files"));
  }
  const uint64_t clock = policy_->OnRegister(static_cast<int>(request.rank()));
  workers_.OnRegister(static_cast<int>(request.rank()), clock, absl::Now());
  response->set_shard(shard_id_);
  response->set_version(store_.version());
  response->set_clock(clock);
  return absl::OkStatus();
}

absl::Status Shard::Push(const proto::PushRequest& request,
                         proto::PushResponse* response) {
  if (auto s = CheckWorker("Push", request.job_id(), request.rank()); !s.ok()) {
    return s;
  }
  const int n = store_.num_chunks();
  if (request.chunks_size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("Push: rank ", request.rank(), " sent ",
                     request.chunks_size(), " chunks; shard ", shard_id_,
                     " owns ", n));
  }
  std::vector<absl::Span<const float>> grads(n);
  std::vector<bool> seen(n, false);
  uint64_t bytes = 0;
  for (const proto::TensorChunk& chunk : request.chunks()) {
    const int global = plan_.Find(chunk.tensor_id(), chunk.chunk_index());
    const int local = global < 0 ? -1 : store_.LocalIndex(global);
    const std::string where =
        absl::StrCat("Push: chunk ", chunk.chunk_index(), " of tensor ",
                     chunk.tensor_id());
    if (local < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " is not owned by shard ", shard_id_));
    }
    const ChunkSpec& spec = store_.chunk_spec(local);
    const std::string& name = spec_.tensors[spec.tensor_id].name;
    if (seen[local]) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " (", name, ") appears twice"));
    }
    seen[local] = true;
    if (chunk.dtype() != proto::DTYPE_FLOAT32) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " (", name, ") has dtype ", chunk.dtype(),
                       "; expected DTYPE_FLOAT32"));
    }
    const std::string& data = chunk.data();
    if (static_cast<int64_t>(data.size()) != spec.length * kElementBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " (", name, ") has ", data.size(), " bytes; expected ",
          spec.length * kElementBytes));
    }
    // Protobuf keeps bytes fields in heap strings, aligned for float.
    if (reinterpret_cast<uintptr_t>(data.data()) % alignof(float) != 0) {
      return absl::InternalError(absl::StrCat(where, " is misaligned"));
    }
    grads[local] = absl::MakeConstSpan(
        reinterpret_cast<const float*>(data.data()), spec.length);
    if (int64_t bad = FirstNonFinite(grads[local]); bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " (", name, ") element ", spec.offset + bad,
          " is not finite (", grads[local][bad], ")"));
    }
    bytes += data.size();
  }
  if (auto s = policy_->Push(static_cast<int>(request.rank()),
                             request.clock(), grads);
      !s.ok()) {
    return s;
  }
  workers_.OnPush(static_cast<int>(request.rank()), request.clock() + 1, bytes,
                  absl::Now());
  response->set_version(store_.version());
  return absl::OkStatus();
}

absl::Status Shard::Pull(const proto::PullRequest& request,
                         absl::Time deadline, proto::PullResponse* response) {
  if (auto s = CheckWorker("Pull", request.job_id(), request.rank()); !s.ok()) {
    return s;
  }
  if (auto s = policy_->WaitReadable(static_cast<int>(request.rank()),
                                     request.clock(), deadline);
      !s.ok()) {
    return s;
  }
  uint64_t bytes = 0;
  store_.Read([&](uint64_t version,
                  absl::Span<const std::vector<float>> params) {
    response->set_version(version);
    response->mutable_chunks()->Reserve(static_cast<int>(params.size()));
    for (size_t i = 0; i < params.size(); ++i) {
      const ChunkSpec& spec = store_.chunk_spec(static_cast<int>(i));
      proto::TensorChunk* chunk = response->add_chunks();
      chunk->set_tensor_id(spec.tensor_id);
      chunk->set_chunk_index(spec.chunk_index);
      chunk->set_dtype(proto::DTYPE_FLOAT32);
      chunk->set_data(reinterpret_cast<const char*>(params[i].data()),
                      params[i].size() * sizeof(float));
      bytes += params[i].size() * sizeof(float);
    }
  });
  workers_.OnPull(static_cast<int>(request.rank()), bytes, absl::Now());
  return absl::OkStatus();
}

absl::Status Shard::Heartbeat(const proto::HeartbeatRequest& request,
                              proto::HeartbeatResponse* response) {
  if (auto s = CheckWorker("Heartbeat", request.job_id(), request.rank());
      !s.ok()) {
    return s;
  }
  workers_.OnHeartbeat(static_cast<int>(request.rank()), absl::Now());
  response->set_version(store_.version());
  return absl::OkStatus();
}

absl::Status Shard::ReportEpoch(const proto::ReportEpochRequest& request) {
  if (auto s = CheckWorker("ReportEpoch", request.job_id(), request.rank());
      !s.ok()) {
    return s;
  }
  if (request.epoch() < 1 ||
      request.epoch() > static_cast<uint32_t>(config_.training.epochs)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReportEpoch: epoch ", request.epoch(), " is outside [1, ",
                     config_.training.epochs, "]"));
  }
  if (request.test_correct() > request.test_total() ||
      !std::isfinite(request.train_loss_sum()) ||
      !std::isfinite(request.train_seconds())) {
    return absl::InvalidArgumentError(
        "ReportEpoch: figures are inconsistent (test_correct > test_total, "
        "or a non-finite loss or time)");
  }
  EpochReport r;
  r.train_loss_sum = request.train_loss_sum();
  r.train_samples = request.train_samples();
  r.train_seconds = request.train_seconds();
  r.test_correct = request.test_correct();
  r.test_total = request.test_total();
  metrics_.Report(static_cast<int>(request.epoch()),
                  static_cast<int>(request.rank()), r);
  return absl::OkStatus();
}

void Shard::GetStatus(proto::ShardStatus* status) const {
  const absl::Time now = absl::Now();
  status->set_job_id(config_.job_id);
  status->set_shard(shard_id_);
  status->set_num_shards(config_.num_shards());
  status->set_policy(policy_->name());
  status->set_chunks(store_.num_chunks());
  status->set_bytes(store_.bytes());
  status->set_version(store_.version());
  status->set_uptime_seconds(absl::ToDoubleSeconds(now - started_));
  status->set_total_epochs(config_.training.epochs);
  const std::vector<WorkerInfo> workers = workers_.Snapshot();
  uint64_t pushes = 0, pulls = 0, bytes_in = 0, bytes_out = 0;
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    const WorkerInfo& w = workers[rank];
    proto::WorkerStatus* ws = status->add_workers();
    ws->set_rank(static_cast<uint32_t>(rank));
    ws->set_registered(w.registered);
    ws->set_clock(w.clock);
    ws->set_pushes(w.pushes);
    ws->set_pulls(w.pulls);
    ws->set_bytes_in(w.bytes_in);
    ws->set_bytes_out(w.bytes_out);
    ws->set_last_seen_seconds_ago(
        w.registered ? absl::ToDoubleSeconds(now - w.last_seen) : -1);
    pushes += w.pushes;
    pulls += w.pulls;
    bytes_in += w.bytes_in;
    bytes_out += w.bytes_out;
  }
  status->set_pushes(pushes);
  status->set_pulls(pulls);
  status->set_bytes_in(bytes_in);
  status->set_bytes_out(bytes_out);
  for (const EpochSummary& e : metrics_.Summaries()) {
    proto::EpochMetrics* m = status->add_epochs();
    m->set_epoch(e.epoch);
    m->set_workers_reported(e.workers_reported);
    m->set_complete(e.complete);
    m->set_train_loss(e.train_loss);
    m->set_test_accuracy(e.test_accuracy);
    m->set_test_total(e.test_total);
    m->set_train_samples(e.train_samples);
    m->set_samples_per_second(e.samples_per_second);
  }
}

void Shard::Shutdown() { policy_->Shutdown(); }

}  // namespace paramd
