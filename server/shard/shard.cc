#include "server/shard/shard.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "server/policy/policy_factory.h"
#include "server/shard/proto_convert.h"
#include "server/shard/push_chunks.h"
#include "spdlog/spdlog.h"

namespace paramd {

absl::StatusOr<std::unique_ptr<Shard>> Shard::Create(
    const JobConfig& config, int shard_id, Clock* clock,
    const ShardOptions& options) {
  if (shard_id < 0 || shard_id >= config.num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shard: ", shard_id, " is outside [0, ", config.num_shards(),
        ") for the ", config.num_shards(), " servers in ", config.path));
  }
  ModelSpec spec = BuildModelSpec(config.model);
  ASSIGN_OR_RETURN(
      PartitionPlan plan,
      PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards()));
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer,
                   MakeOptimizer(config.optimizer));
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<RowTable>> tables,
                   ShardRows::MakeTables(config, shard_id));
  auto shard = std::unique_ptr<Shard>(new Shard(
      config, shard_id, std::move(spec), std::move(plan), std::move(optimizer),
      std::move(tables), clock != nullptr ? clock : RealClock()));
  if (config.model.initial_values_from_rank0) {
    shard->policy_->AwaitInitialValues();  // A restored checkpoint ends it.
  }
  if (!config.checkpoint.dir.empty()) {
    // Before the restore: a delta's rows are applied on the full state's.
    if (config.checkpoint.full_every > 1) shard->store_.TrackChanges();
    shard->store_.SetSnapshotDirs(
        [dir = config.checkpoint.dir, shard_id](uint64_t version) {
          return Checkpointer::RowsPath(dir, shard_id, version);
        });
    ASSIGN_OR_RETURN(
        shard->checkpoints_,
        ShardCheckpoints::Open(config, shard_id, shard->plan_.fingerprint(),
                               options.file_system,
                               options.fresh && !options.backup, shard->clock_,
                               shard->policy_.get(), &shard->metrics_));
  }
  if (config.replication.enabled()) {
    Shard* self = shard.get();
    self->replica_ = std::make_unique<ShardReplica>(
        self->config_, shard_id, self->plan_.fingerprint(), options.backup,
        self->clock_, self->policy_.get(), &self->workers_, &self->metrics_);
    self->checks_.set_admit(
        [self](const char* rpc) { return self->replica_->Admit(rpc); });
  }
  return shard;
}

Shard::Shard(const JobConfig& config, int shard_id, ModelSpec spec,
             PartitionPlan plan, std::unique_ptr<Optimizer> optimizer,
             std::vector<std::unique_ptr<RowTable>> tables, Clock* clock)
    : config_(config),
      shard_id_(shard_id),
      spec_(std::move(spec)),
      plan_(std::move(plan)),
      clock_(clock),
      started_(clock->Now()),
      store_(spec_, plan_, shard_id, config.seed, std::move(optimizer),
             std::move(tables)),
      rows_(config.num_shards(), shard_id, &store_),
      policy_(MakeUpdatePolicy(config.policy, config.num_workers, &store_)),
      workers_(config.num_workers),
      metrics_(config.num_workers),
      guard_(config, shard_id, &store_),
      trace_(config, shard_id),
      stalls_(shard_id, absl::Seconds(config.liveness.stall_warn_seconds),
              &waiters_, policy_.get(), &workers_),
      leases_(shard_id, config.liveness.lease_seconds, policy_.get(),
              &workers_),
      exports_(config.job_id, &store_, clock),
      calls_(config.num_workers, config.limits.max_inflight_per_worker,
             shard_id),
      checks_(config_, shard_id, spec_, plan_, store_, workers_) {}

int64_t Shard::max_message_bytes() const {
  // Every chunk plus generous framing; at least 4 MiB, and with embedding
  // tables room for a step's rows (kMaxRowMessageBytes).
  return std::max<int64_t>(
      store_.num_tables() > 0 ? kMaxRowMessageBytes : 4 << 20,
      store_.bytes() + 64 * store_.num_chunks() + (1 << 20) +
          (store_.num_tables() > 0 ? kMaxRowMessageBytes : 0));
}

int64_t Shard::transport_memory_bytes() const {
  if (config_.limits.transport_memory_mb > 0) {
    return config_.limits.transport_memory_mb << 20;
  }
  return std::max<int64_t>(
      256 << 20, int64_t{4} * config_.num_workers * max_message_bytes());
}

absl::Status Shard::Register(const proto::RegisterRequest& request,
                             proto::RegisterResponse* response) {
  RETURN_IF_ERROR(checks_.Registration(request, launch_));
  const int rank = static_cast<int>(request.rank());
  response->set_shard(shard_id_);
  if (!request.join()) {
    workers_.OnSeen(rank, clock_->Now());
    response->set_version(store_.version());
    response->set_clock(policy_->ProposeClock(rank));
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(policy_->Join(rank, request.clock()));
  workers_.OnRegister(rank, request.incarnation(), clock_->Now());
  spdlog::info("shard {}: rank {} registered; it continues from clock {}",
               shard_id_, rank, request.clock());
  // On the backup before it is acknowledged: a backup taking over without
  // it would refuse the rank's next push, and the rank, registering again,
  // could continue past a clock this shard never applied.
  if (replica_ != nullptr) RETURN_IF_ERROR(policy_->SendState());
  response->set_version(store_.version());
  response->set_clock(request.clock());
  return absl::OkStatus();
}

absl::Status Shard::Push(const proto::PushRequest& request,
                         proto::PushResponse* response) {
  return Push(ToPushView(request), response);
}

absl::Status Shard::Initialize(const PushView& request,
                               proto::PushResponse* response) {
  RETURN_IF_ERROR(checks_.InitialValues(request));
  RequestChecks::ChunkSet chunks;
  RETURN_IF_ERROR(
      checks_.Gather("Initialize", request.rank, request.chunks, &chunks));
  bool applied = false;
  RETURN_IF_ERROR(policy_->Initialize(chunks.values, &applied));
  if (applied) {
    spdlog::info("shard {}: initial values from rank 0 ({} chunks)", shard_id_,
                 chunks.values.size());
  }
  response->set_version(store_.version());
  return absl::OkStatus();
}

absl::Status Shard::CheckChunks(absl::Span<ChunkView> chunks) const {
  return checks_.Chunks(chunks);
}

absl::Status Shard::Push(const PushView& request,
                         proto::PushResponse* response) {
  RETURN_IF_ERROR(
      checks_.RegisteredWorker("Push", request.job_id, request.rank));
  RETURN_IF_ERROR(calls_.Enter("Push", static_cast<int>(request.rank)));
  const absl::Time entered = clock_->Now();
  absl::Cleanup leave = [this, &request, entered] {
    stats_.RecordPushTime(clock_->Now() - entered);
    calls_.Leave(static_cast<int>(request.rank));
  };
  RequestChecks::ChunkSet chunks;
  RETURN_IF_ERROR(
      checks_.Gather("Push", request.rank, request.chunks, &chunks));
  uint64_t bytes = chunks.bytes;
  uint64_t float32_bytes = chunks.float32_bytes;
  PushRows rows;
  RETURN_IF_ERROR(rows_.CheckPush(request, &rows));
  bytes += rows.wire_bytes;
  float32_bytes += rows.float32_bytes;
  const absl::Time now = clock_->Now();
  const int rank = static_cast<int>(request.rank);
  workers_.OnSeen(rank, now);
  GradientGuard::Verdict verdict;
  if (guard_.watching() && !policy_->IsRetry(rank, request.clock)) {
    ASSIGN_OR_RETURN(verdict, guard_.Judge(rank, request.clock, request.loss));
  }
  const bool skip = verdict.skip;
  GradientGuard::Clipped clipped;
  const bool clip = !skip && guard_.Clip(chunks.values, rows.grads, &clipped);
  bool duplicate = false;
  const bool traced = trace_.WantsPush(request.clock);
  StepTimes step;  // Where the optimizer step went, when traced.
  RETURN_IF_ERROR(
      policy_->Push(rank, request.clock,
                    absl::MakeConstSpan(clip ? clipped.chunks : chunks.values),
                    absl::MakeConstSpan(clip ? clipped.rows : rows.grads),
                    &duplicate, skip, traced ? &step : nullptr));
  if (traced) {
    trace_.Push(rank, request.clock, entered, clock_->Now(), store_.version(),
                bytes, duplicate, policy_->LastStaleness(rank));
    trace_.Step(rank, request.clock, step, store_);
  }
  if (!duplicate) {
    guard_.Record(rank, request.clock, request.loss, verdict);
    if (clip) guard_.CountClipped(rank);
    for (const RowGrads& r : rows.grads) {
      if (!skip) store_.table(r.table).CountPushed(r.ids.size());
    }
    Pushed(rank, bytes, float32_bytes, request.loss, now);
  }
  SubmitCaptured();
  response->set_version(store_.version());
  response->set_duplicate(duplicate);
  return absl::OkStatus();
}

void Shard::Pushed(int rank, uint64_t bytes, uint64_t float32_bytes, float loss,
                   absl::Time now, bool whole) {
  workers_.OnPush(rank, bytes, loss, now, whole);
  if (whole) stats_.RecordPush(now);
  stats_.RecordPushFloat32Bytes(float32_bytes);
}

absl::Status Shard::PushSlice(const PushView& header,
                              absl::Span<const ChunkView> chunks,
                              bool* complete) {
  RETURN_IF_ERROR(checks_.RegisteredWorker("Push", header.job_id, header.rank));
  if (!ServersTakeSlices(config_)) {
    return absl::FailedPreconditionError("Push: this job's pushes are whole");
  }
  const int rank = static_cast<int>(header.rank);
  RETURN_IF_ERROR(calls_.Enter("Push", rank));
  absl::Cleanup leave = [this, rank] { calls_.Leave(rank); };
  const absl::Time entered = clock_->Now();
  RequestChecks::ChunkSet slice;
  RETURN_IF_ERROR(
      checks_.Gather("Push", header.rank, chunks, &slice, /*whole=*/false));
  bool duplicate = false;
  RETURN_IF_ERROR(policy_->PushChunks(rank, header.clock, slice.locals,
                                      slice.values, complete, &duplicate));
  // The step timeline: an apply per slice (the rounds' optimizer steps are
  // not timed chunk by chunk here).
  if (trace_.WantsPush(header.clock)) {
    trace_.Push(rank, header.clock, entered, clock_->Now(), store_.version(),
                slice.bytes, duplicate, policy_->LastStaleness(rank));
  }
  // A slice's bytes count as they come; the push once, when it is whole.
  if (!duplicate) {
    Pushed(rank, slice.bytes, slice.float32_bytes, header.loss, clock_->Now(),
           *complete);
  }
  SubmitCaptured();
  return absl::OkStatus();
}

void Shard::SubmitCaptured() {
  if (checkpoints_ == nullptr) return;
  // Written by the checkpoints' own thread: the push is answered now.
  if (std::optional<PolicyState> state = policy_->TakeCaptured()) {
    checkpoints_->Submit(*std::move(state));
  }
}

absl::Status Shard::Pull(const proto::PullRequest& request, absl::Time deadline,
                         Cancellation* cancel,
                         std::shared_ptr<const ParamSnapshot>* snapshot) {
  RETURN_IF_ERROR(
      checks_.RegisteredWorker("Pull", request.job_id(), request.rank()));
  const proto::DType dtype = request.dtype();
  RETURN_IF_ERROR(checks_.PullDtype("Pull", dtype));
  const int rank = static_cast<int>(request.rank());
  RETURN_IF_ERROR(calls_.Enter("Pull", rank));
  absl::Cleanup leave = [this, rank] { calls_.Leave(rank); };
  const absl::Time start = clock_->Now();
  workers_.OnSeen(rank, start);
  RETURN_IF_ERROR(
      AwaitReadable(rank, request.clock(), start, deadline, cancel));
  *snapshot =
      Served(rank, request.clock(), start, dtype == proto::DTYPE_FLOAT16);
  return absl::OkStatus();
}

std::shared_ptr<const ParamSnapshot> Shard::Served(
    int rank, uint64_t clock, absl::Time start, bool half,
    absl::Span<const int> slice) {
  const absl::Time now = clock_->Now();
  stats_.RecordPullWait(now - start);
  std::shared_ptr<const ParamSnapshot> snapshot =
      slice.empty() ? store_.Snapshot() : store_.SnapshotAt(clock);
  policy_->NotePulled(rank, snapshot->version);
  trace_.Pull(rank, clock, start, now, snapshot->version);
  stats_.RecordPullTime(clock_->Now() - start);
  // A slice's reply counts its bytes; the pull counts with the shard's
  // last chunk (slices come in order).
  uint64_t bytes = slice.empty() ? static_cast<uint64_t>(store_.bytes()) : 0;
  for (int c : slice) bytes += store_.chunk_spec(c).length * kElementBytes;
  workers_.OnPull(rank, bytes / (half ? 2 : 1), now,
                  slice.empty() || slice.back() == store_.num_chunks() - 1);
  return snapshot;
}

uint64_t Shard::StartPull(const proto::PullRequest& request, PullDone done,
                          std::vector<int> locals) {
  absl::Status s =
      checks_.RegisteredWorker("Pull", request.job_id(), request.rank());
  if (s.ok()) s = checks_.PullDtype("Pull", request.dtype());
  const int rank = static_cast<int>(request.rank());
  if (s.ok()) s = calls_.Enter("Pull", rank);
  if (!s.ok()) {
    done(s);
    return 0;
  }
  const absl::Time start = clock_->Now();
  workers_.OnSeen(rank, start);
  // Visible to Tick and the status RPC while it waits.
  const uint64_t waiter = waiters_.Add(rank, request.clock(), start);
  const bool half = request.dtype() == proto::DTYPE_FLOAT16;
  const std::vector<int> slice = locals;
  auto ready = [this, rank, clock = request.clock(), half, start, waiter, slice,
                done = std::move(done)](absl::Status ready) {
    waiters_.Remove(waiter);
    absl::StatusOr<std::shared_ptr<const ParamSnapshot>> result;
    if (ready.ok()) {
      result = Served(rank, clock, start, half, slice);
    } else {
      result = std::move(ready);
    }
    calls_.Leave(rank);
    done(std::move(result));
  };
  if (slice.empty()) {
    return policy_->WhenReadable(rank, request.clock(), std::move(ready));
  }
  return policy_->WhenChunksReadable(rank, request.clock(), std::move(locals),
                                     std::move(ready));
}

void Shard::CancelPull(uint64_t handle) {
  if (handle == 0) return;
  if (std::function<void(absl::Status)> ready =
          policy_->CancelWhenReadable(handle)) {
    ready(absl::CancelledError("Pull: the caller cancelled"));
  }
}

absl::Status Shard::AwaitReadable(int rank, uint64_t clock, absl::Time start,
                                  absl::Time deadline, Cancellation* cancel,
                                  bool own_pushes) {
  // Visible to Tick and the status RPC while it waits.
  std::optional<uint64_t> id;
  const absl::Status s = policy_->WaitReadable(
      rank, clock, deadline, cancel,
      [&] { id = waiters_.Add(rank, clock, start); }, own_pushes);
  if (id.has_value()) waiters_.Remove(*id);
  return s;
}

absl::Status Shard::Heartbeat(const proto::HeartbeatRequest& request,
                              proto::HeartbeatResponse* response) {
  RETURN_IF_ERROR(
      checks_.RegisteredWorker("Heartbeat", request.job_id(), request.rank()));
  const int rank = static_cast<int>(request.rank());
  if (request.finished()) {
    workers_.OnFinished(rank, clock_->Now());
    policy_->Leave(rank);
    spdlog::info("shard {}: rank {} finished at clock {}", shard_id_, rank,
                 request.clock());
  } else {
    workers_.OnHeartbeat(rank, clock_->Now());
  }
  response->set_version(store_.version());
  trace_.FillHeartbeat(request.clock(), response);
  return absl::OkStatus();
}

absl::Status Shard::ReportEpoch(const proto::ReportEpochRequest& request) {
  RETURN_IF_ERROR(checks_.RegisteredWorker("ReportEpoch", request.job_id(),
                                           request.rank()));
  RETURN_IF_ERROR(checks_.EpochReport(request));
  workers_.OnSeen(static_cast<int>(request.rank()), clock_->Now());
  metrics_.Report(static_cast<int>(request.epoch()),
                  static_cast<int>(request.rank()), ToEpochReport(request));
  // The report counts now: saved beside the checkpoints, and on the
  // backup before it is acknowledged (a restart could lose it otherwise).
  if (checkpoints_ != nullptr) checkpoints_->SaveReports();
  return replica_ != nullptr ? policy_->SendState() : absl::OkStatus();
}

void Shard::Tick() {
  if (replica_ != nullptr) replica_->Tick();
  if (!serving()) return;
  const absl::Time now = clock_->Now();
  leases_.Check(now);
  stalls_.Check(now);
}

void Shard::Shutdown() {
  policy_->Shutdown();
  if (absl::Status s = trace_.Write(); !s.ok()) {
    spdlog::warn("shard {}: {}", shard_id_, std::string(s.message()));
  }
}

bool Shard::TEST_AwaitWaitingPulls(size_t n, absl::Duration timeout) {
  return waiters_.TEST_AwaitCount(n, timeout);
}

absl::Status Shard::PullRows(const PullRowsView& request, absl::Time deadline,
                             Cancellation* cancel, RowsReply* reply) {
  RETURN_IF_ERROR(
      checks_.RegisteredWorker("PullRows", request.job_id, request.rank));
  RETURN_IF_ERROR(checks_.PullDtype("PullRows", request.dtype));
  std::vector<uint64_t> ids;
  RETURN_IF_ERROR(rows_.CheckIds("PullRows", request.table, request.ids, &ids));
  // The reply is bounded like every message: refused before it is built.
  RETURN_IF_ERROR(
      rows_.CheckReplySize(request.table, ids.size(), request.dtype));
  const int rank = static_cast<int>(request.rank);
  RETURN_IF_ERROR(calls_.Enter("PullRows", rank));
  absl::Cleanup leave = [this, rank] { calls_.Leave(rank); };
  const absl::Time start = clock_->Now();
  workers_.OnSeen(rank, start);
  RETURN_IF_ERROR(AwaitReadable(rank, request.clock, start, deadline, cancel,
                                store_.table(request.table).config().async()));
  rows_.Read(request.table, ids, request.dtype, store_.version(), reply);
  workers_.OnPull(rank, reply->bytes().size(), clock_->Now());
  return absl::OkStatus();
}

void Shard::GetStatus(proto::ShardStatus* status) const {
  const absl::Time now = clock_->Now();
  status->set_job_id(config_.job_id);
  status->set_shard(shard_id_);
  status->set_num_shards(config_.num_shards());
  status->set_policy(policy_->name());
  rows_.FillStatus(status);
  status->set_backup_workers(config_.policy.backup_workers);
  status->set_staleness_bound(
      config_.policy.type == PolicyType::kSsp ? config_.policy.staleness : -1);
  status->set_lease_seconds(config_.liveness.lease_seconds);
  status->set_chunks(store_.num_chunks());
  status->set_bytes(store_.bytes());
  status->set_version(store_.version());
  status->set_uptime_seconds(absl::ToDoubleSeconds(now - started_));
  status->set_total_epochs(config_.training.epochs);
  status->set_pushes_per_second(stats_.PushesPerSecond(now));
  status->set_pull_wait_p50_ms(stats_.PullWaitMs(50));
  status->set_pull_wait_p99_ms(stats_.PullWaitMs(99));
  if (checkpoints_ != nullptr) checkpoints_->FillStatus(now, status);
  status->set_bytes_in_float32(stats_.push_float32_bytes());
  status->set_shared_memory_bytes_in(stats_.shared_memory_bytes_in());
  status->set_shared_memory_bytes_out(stats_.shared_memory_bytes_out());
  FillHistogram(policy_->push_staleness().Snapshot(),
                status->mutable_push_staleness());
  if (config_.policy.type != PolicyType::kSync) {
    status->set_staleness_scaling(
        StalenessScalingName(config_.policy.staleness_scaling));
  }
  FillWorkersStatus(workers_.Snapshot(), policy_->Workers(), metrics_, now,
                    status);
  stalls_.FillStatus(now, status);
  guard_.FillStatus(status);
  if (replica_ != nullptr) replica_->FillStatus(status->mutable_replica());
}

void Shard::FlushCheckpoints() {
  if (checkpoints_ != nullptr) checkpoints_->Flush();
}

absl::StatusOr<proto::ExportResponse> Shard::Export(
    const proto::ExportRequest& request) {
  if (!serving()) {
    return absl::FailedPreconditionError(
        "Export: this process does not serve the shard (its replica does)");
  }
  return exports_.Export(request);
}

absl::StatusOr<proto::CheckpointResponse> Shard::CheckpointNow() {
  if (checkpoints_ == nullptr) {
    return absl::FailedPreconditionError(
        "Checkpoint: the job has no checkpoint.dir");
  }
  if (!serving()) {
    return absl::FailedPreconditionError(
        "Checkpoint: this process does not serve the shard (its replica "
        "does)");
  }
  if (policy_->AwaitingInitialValues()) {
    return absl::FailedPreconditionError(
        "Checkpoint: the shard still waits for rank 0's initial values");
  }
  PolicyState state = policy_->Capture();
  const uint64_t version = state.version;
  ASSIGN_OR_RETURN(std::string path, checkpoints_->Write(std::move(state)));
  proto::CheckpointResponse response;
  response.set_path(path);
  response.set_version(version);
  return response;
}

}  // namespace paramd
