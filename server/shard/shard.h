// Shard: the logic of one parameter-server shard, behind the RPC layer.
//
// It validates requests (job id, rank, plan, chunk set, sizes, dtype,
// finiteness) before anything changes, then hands gradients to the job's
// UpdatePolicy, serves parameters from the ShardStore, and keeps per-worker
// counters and the job's epoch metrics. Tick(), called periodically, drops
// workers whose lease expired and logs pulls that wait too long, once
// each, with what they wait on. Time comes from a Clock, so tests drive
// leases with a FakeClock. It speaks protobuf messages but knows nothing
// of gRPC; rpc adapters call it. Thread-safe.
#ifndef PARAMD_SERVER_SHARD_SHARD_H_
#define PARAMD_SERVER_SHARD_SHARD_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/cancellation.h"
#include "common/base/clock.h"
#include "common/config/job_config.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "common/wire/row_wire.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.pb.h"
#include "server/checkpoint/file_system.h"
#include "server/guards/call_limiter.h"
#include "server/guards/gradient_guard.h"
#include "server/guards/lease_watch.h"
#include "server/policy/pull_waiters.h"
#include "server/policy/update_policy.h"
#include "server/policy/worker_registry.h"
#include "server/replication/shard_replica.h"
#include "server/shard/request_checks.h"
#include "server/shard/shard_checkpoints.h"
#include "server/shard/shard_exports.h"
#include "server/shard/shard_rows.h"
#include "server/stats/job_metrics.h"
#include "server/stats/shard_stats.h"
#include "server/stats/shard_trace.h"
#include "server/stats/stall_inspector.h"
#include "server/store/shard_store.h"

namespace paramd {

struct ShardOptions {
  // Where checkpoints go (LocalFileSystem() when null); must outlive the
  // shard.
  FileSystem* file_system = nullptr;
  // Discard this shard's checkpoints instead of restoring the newest.
  bool fresh = false;
  // replication.factor 2: start as the shard's backup (ShardReplica).
  bool backup = false;
};

class Shard {
 public:
  // What a push's row blocks, or a PullRows request or reply, may hold.
  static constexpr int64_t kMaxRowMessageBytes = ShardRows::kMaxMessageBytes;

  // Builds shard `shard_id` of the job: its plan, initial parameters,
  // optimizer and policy; with checkpoint.dir, restores the newest valid
  // checkpoint there (an error when every one is damaged, or one is of
  // another job or plan). `clock` (RealClock() when null) must outlive the
  // shard.
  static absl::StatusOr<std::unique_ptr<Shard>> Create(
      const JobConfig& config, int shard_id, Clock* clock = nullptr,
      const ShardOptions& options = ShardOptions());

  // Writes a checkpoint of the state now; returns its path.
  // FailedPrecondition without checkpoint.dir.
  absl::StatusOr<proto::CheckpointResponse> CheckpointNow();
  // The model for serving, page by page (proto ExportRequest);
  // FailedPrecondition where this process does not serve the shard.
  absl::StatusOr<proto::ExportResponse> Export(
      const proto::ExportRequest& request);
  // paramctl trace on a running job (proto TraceRequest): arms a step
  // timeline's window, or writes what was recorded.
  absl::StatusOr<proto::TraceResponse> Trace(
      const proto::TraceRequest& request) {
    return trace_.Serve(request);
  }
  // The step timeline, for the RPC layer's events (a StepStream's reply).
  ShardTrace& trace() { return trace_; }
  // Returns once the captures a push handed to the checkpoint writer are
  // written (checkpoint.every_steps; pushes do not wait for them).
  void FlushCheckpoints();

  absl::Status Register(const proto::RegisterRequest& request,
                        proto::RegisterResponse* response);
  // On error the shard's state is exactly as before. The gRPC service
  // decodes pushes straight into a PushView (common/wire/wire_format.h); the
  // protobuf form is for callers that hold a message.
  absl::Status Push(const PushView& request, proto::PushResponse* response);
  absl::Status Push(const proto::PushRequest& request,
                    proto::PushResponse* response);
  // Rank 0's initial values for every chunk this shard owns
  // (model.initial_values: rank0), as a push of values instead of
  // gradients: applied once, before any pull may read the shard; a retry
  // or a second call is acknowledged and changes nothing. Dense chunks
  // only; on error nothing changes.
  absl::Status Initialize(const PushView& request,
                          proto::PushResponse* response);
  // Checks chunks of a push that is still arriving (ownership, dtype,
  // size, finiteness) and records each one's local index, so that Push
  // does not read them again: a streamed push is checked message by message
  // while the next is on the wire. Push still checks the set is complete,
  // without duplicates.
  absl::Status CheckChunks(absl::Span<ChunkView> chunks) const;
  // One slice of a push in slices (where ServersTakeSlices): `chunks` (checked
  // by CheckChunks; no rows) of the push whose first message's header `header`
  // gives, applied at once (UpdatePolicy::PushChunks). `*complete` once the
  // push's last chunk is in; the push is then counted as Push counts one.
  absl::Status PushSlice(const PushView& header,
                         absl::Span<const ChunkView> chunks, bool* complete);
  // Waits until the policy lets the pull proceed; DeadlineExceeded at
  // `deadline` (real time; the caller may call again), Cancelled as soon
  // as `cancel` (when given) is cancelled, Unavailable after Shutdown.
  // On success `*snapshot` holds every chunk at the version served, shared
  // with every other pull of that version and never changed.
  absl::Status Pull(const proto::PullRequest& request, absl::Time deadline,
                    Cancellation* cancel,
                    std::shared_ptr<const ParamSnapshot>* snapshot);
  // Pull without a thread waiting (the StepStream reactor): the same
  // checks and bookkeeping, no deadline (the caller cancels). `done` runs
  // once with the snapshot to serve or the error: here when the pull fails
  // its checks or may be served at once, else on the thread whose push (or
  // a rank's leaving, or Shutdown) lets it proceed, with no shard lock
  // held. Returns a handle for CancelPull; 0 when `done` ran here.
  using PullDone =
      std::function<void(absl::StatusOr<std::shared_ptr<const ParamSnapshot>>)>;
  // With `locals`, a slice's reply: only those chunks are read, once the
  // round stepped them (UpdatePolicy::WhenChunksReadable), from
  // ShardStore::SnapshotAt(request.clock).
  uint64_t StartPull(const proto::PullRequest& request, PullDone done,
                     std::vector<int> locals = {});
  // Ends a pull StartPull left waiting: its `done` runs here with
  // CANCELLED, unless it ran or is running already.
  void CancelPull(uint64_t handle);
  // Rows of one embedding table for a worker at request.clock: waits as
  // Pull does (for a table with policy async, for the worker's own pushes
  // before request.clock only), then reads each id's row (its initial value if
  // never pushed). Ids must pass RowBlock's rules (sorted, distinct, in range,
  // owned by this shard).
  using RowsReply = paramd::RowsReply;
  absl::Status PullRows(const PullRowsView& request, absl::Time deadline,
                        Cancellation* cancel, RowsReply* reply);
  absl::Status Heartbeat(const proto::HeartbeatRequest& request,
                         proto::HeartbeatResponse* response);
  absl::Status ReportEpoch(const proto::ReportEpochRequest& request);
  void GetStatus(proto::ShardStatus* status) const;

  // Drops workers silent for longer than their lease from the live set and
  // logs stalls: pulls waiting longer than stall_warn_seconds, again with
  // back-off (StallInspector).
  void Tick();

  // Wakes every waiting pull with Unavailable, and writes the step
  // timeline (tracing).
  void Shutdown();

  // The launch this shard serves (see RegisterRequest.launch); set before
  // serving. Registrations from another launch are refused.
  void set_launch(std::string launch) {
    if (replica_ != nullptr) replica_->set_launch(launch);
    launch_ = std::move(launch);
  }
  // replication.factor 2: this process's part in it (the RPC layer gives
  // it its peer and starts it); null otherwise.
  ShardReplica* replica() { return replica_.get(); }
  // Whether this process serves the shard (not a replica that is backup
  // or replaced).
  bool serving() const {
    return replica_ == nullptr ||
           replica_->role() == ShardReplica::Role::kPrimary;
  }

  const JobConfig& config() const { return config_; }
  int shard_id() const { return shard_id_; }
  const std::string& launch() const { return launch_; }
  const PartitionPlan& plan() const { return plan_; }
  const ShardStore& store() const { return store_; }
  const ShardStats& stats() const { return stats_; }
  // Chunk bytes a same-host StepStream moved through shared memory.
  void NoteSharedMemory(uint64_t in, uint64_t out) {
    stats_.RecordSharedMemoryBytes(in, out);
  }
  UpdatePolicy& policy() { return *policy_; }
  const UpdatePolicy& policy() const { return *policy_; }

  // For tests: waits up to `timeout` until `n` pulls are waiting.
  bool TEST_AwaitWaitingPulls(size_t n, absl::Duration timeout);
  // The largest message a worker of this job sends this shard.
  int64_t max_message_bytes() const;
  // What gRPC may hold for this shard's connections
  // (limits.transport_memory_mb).
  int64_t transport_memory_bytes() const;

 private:
  // A checkpoint the last push captured (checkpoint.every_steps), handed
  // to the checkpoints' thread; whole pushes and slices both.
  void SubmitCaptured();
  Shard(const JobConfig& config, int shard_id, ModelSpec spec,
        PartitionPlan plan, std::unique_ptr<Optimizer> optimizer,
        std::vector<std::unique_ptr<RowTable>> tables, Clock* clock);

  // Waits until a pull of `rank` at `clock` may be served, visible to Tick
  // and the status RPC meanwhile; as Pull (`own_pushes`: as
  // UpdatePolicy::WaitReadable's).
  absl::Status AwaitReadable(int rank, uint64_t clock, absl::Time start,
                             absl::Time deadline, Cancellation* cancel,
                             bool own_pushes = false);
  // A pull of `rank` at `clock`, waiting since `start`, is readable: the
  // snapshot it serves, with its wait, time, bytes (`half`: float16) and
  // version noted where the shard keeps them.
  // With `slice`, the chunks a slice's reply reads (their bytes counted).
  std::shared_ptr<const ParamSnapshot> Served(int rank, uint64_t clock,
                                              absl::Time start, bool half,
                                              absl::Span<const int> slice = {});
  // A push's bookkeeping once it is applied (not a duplicate), or a
  // slice's (`whole` false until the push's last).
  void Pushed(int rank, uint64_t bytes, uint64_t float32_bytes, float loss,
              absl::Time now, bool whole = true);

  // Constant after construction.
  const JobConfig config_;
  const int shard_id_;
  const ModelSpec spec_;
  const PartitionPlan plan_;
  Clock* const clock_;
  const absl::Time started_;
  std::string launch_;  // Set before serving, then constant.

  // Each internally synchronised.
  ShardStore store_;
  const ShardRows rows_;  // Over store_'s tables.
  std::unique_ptr<UpdatePolicy> policy_;
  WorkerRegistry workers_;
  JobMetrics metrics_;
  ShardStats stats_;
  PullWaiters waiters_;
  GradientGuard guard_;    // Clipping and the divergence watch.
  ShardTrace trace_;       // The step timeline (tracing).
  StallInspector stalls_;  // Over waiters_, policy_ and workers_.
  LeaseWatch leases_;      // Over policy_ and workers_.
  ShardExports exports_;   // Over store_.

  // Null without checkpoint.dir; set before serving.
  std::unique_ptr<ShardCheckpoints> checkpoints_;
  std::unique_ptr<ShardReplica> replica_;

  CallLimiter calls_;     // Pushes and pulls inside the shard, by rank.
  RequestChecks checks_;  // Over the plan, the store and workers_.
};

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_SHARD_H_
