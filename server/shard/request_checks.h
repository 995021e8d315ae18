// RequestChecks: what a shard requires of a request before anything
// changes — its job and rank, that the rank registered, a pushed chunk's
// ownership and payload (server/shard/push_chunks.h), a pull's dtype —
// and what a replica requires of its peer's calls and states.
// Errors name the RPC (and the chunk), with client bytes quoted escaped.
// Thread-safe: it reads constant state and the registry, which is.
#ifndef PARAMD_SERVER_SHARD_REQUEST_CHECKS_H_
#define PARAMD_SERVER_SHARD_REQUEST_CHECKS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/config/job_config.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "common/wire/wire_format.h"
#include "proto/paramd.pb.h"
#include "server/policy/worker_registry.h"
#include "server/store/shard_store.h"

namespace paramd {

// Client bytes as they may appear in an error: escaped (no control or NUL
// bytes reach a log or a terminal) and cut to 64 bytes.
std::string QuoteClientBytes(absl::string_view bytes);

class RequestChecks {
 public:
  // Everything given outlives this.
  RequestChecks(const JobConfig& config, int shard_id, const ModelSpec& spec,
                const PartitionPlan& plan, const ShardStore& store,
                const WorkerRegistry& workers)
      : job_id_(config.job_id),
        num_workers_(config.num_workers),
        epochs_(config.training.epochs),
        initial_values_from_rank0_(config.model.initial_values_from_rank0),
        shard_id_(shard_id),
        spec_(spec),
        plan_(plan),
        store_(store),
        workers_(workers) {}

  // A worker's call, its job and rank checked, may be served here
  // (replication: the shard's backup refuses, or takes over); set before
  // serving.
  void set_admit(std::function<absl::Status(const char*)> admit) {
    admit_ = std::move(admit);
  }

  // FailedPrecondition for another job's id, InvalidArgument for a rank
  // outside the job, then what set_admit's check says.
  absl::Status Worker(const char* rpc, const std::string& job_id,
                      uint32_t rank) const;
  // Worker, then Aborted unless `rank` has registered (joined) with this
  // shard: what every RPC but Register requires.
  absl::Status RegisteredWorker(const char* rpc, const std::string& job_id,
                                uint32_t rank) const;
  // Worker, then FailedPrecondition for a registration of another launch
  // than `launch` (another start of the job on these ports) or with
  // another partition plan (another job file).
  absl::Status Registration(const proto::RegisterRequest& request,
                            const std::string& launch) const;
  // RegisteredWorker, then what Initialize requires: a job whose initial
  // values come from rank 0, sent by rank 0, dense chunks and no rows.
  absl::Status InitialValues(const PushView& request) const;
  // Everything Push requires of one chunk but its uniqueness; `*local` is
  // its local index (-1 if another shard owns it).
  absl::Status Chunk(const ChunkView& chunk, int* local) const;
  // Chunk for each, recording each one's local index (checked_local).
  absl::Status Chunks(absl::Span<ChunkView> chunks) const;
  // The chunks of one push (or of rank 0's initial values): exactly this
  // shard's set — or with `whole` false some of it (a slice) — each once,
  // each checked as Chunk (unless it was already: checked_local), read as
  // float32 by local index.
  struct ChunkSet {
    std::vector<absl::Span<const float>> values;  // By local index.
    std::vector<int> locals;                      // Those given, as sent.
    std::vector<std::vector<float>> storage;      // Widened or scattered ones.
    uint64_t bytes = 0;                           // What travelled.
    uint64_t float32_bytes = 0;                   // What they stand for.
  };
  absl::Status Gather(const char* rpc, uint32_t rank,
                      absl::Span<const ChunkView> chunks, ChunkSet* out,
                      bool whole = true) const;
  // InvalidArgument naming `rpc` unless `dtype` is one a pull may ask for
  // (float32, unset, or float16).
  static absl::Status PullDtype(const char* rpc, int dtype);
  // An epoch report's figures: the epoch in [1, training.epochs], finite
  // non-negative sums, no more correct than total, and test scores either
  // absent or one count per bin that add up to test_total.
  absl::Status EpochReport(const proto::ReportEpochRequest& request) const;

 private:
  static absl::Status TestScores(const proto::ReportEpochRequest& request);

  const std::string job_id_;
  const int num_workers_;
  const int epochs_;                      // training.epochs
  const bool initial_values_from_rank0_;  // model.initial_values: rank0
  const int shard_id_;
  const ModelSpec& spec_;
  const PartitionPlan& plan_;
  const ShardStore& store_;
  const WorkerRegistry& workers_;
  std::function<absl::Status(const char*)> admit_;
};

// What a replica requires of its peer's calls (Replicate, Handover;
// server/replication/shard_replica.h): InvalidArgument naming `rpc` unless the
// call's `job_id`, `shard` and `launch` are `own`'s.
struct PeerIdentity {
  std::string job_id;
  uint32_t shard = 0;
  std::string launch;
};
absl::Status CheckPeerCall(const char* rpc, const PeerIdentity& call,
                           const PeerIdentity& own);
// InvalidArgument naming what a replicated state (a Replicate's, or a
// Handover answer's) has that this replica's has not: its plan, policy,
// per-rank sizes (`num_workers` each) and a store state.
absl::Status CheckReplicaState(const proto::ReplicaState& state,
                               uint64_t plan_fingerprint,
                               const std::string& policy, int num_workers);

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_REQUEST_CHECKS_H_
