#include "server/shard/request_checks.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/base/score_histogram.h"
#include "common/base/status_macros.h"
#include "proto/paramd.pb.h"
#include "server/shard/push_chunks.h"

namespace paramd {

std::string QuoteClientBytes(absl::string_view bytes) {
  constexpr size_t kMax = 64;
  std::string out = absl::CHexEscape(bytes.substr(0, kMax));
  if (bytes.size() > kMax) absl::StrAppend(&out, "...");
  return out;
}

absl::Status RequestChecks::Registration(const proto::RegisterRequest& request,
                                         const std::string& launch) const {
  RETURN_IF_ERROR(Worker("Register", request.job_id(), request.rank()));
  if (request.launch() != launch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Register: rank ", request.rank(), " belongs to launch '",
        QuoteClientBytes(request.launch()), "' but this shard serves launch '",
        launch,
        "': another start of the same job is using these servers' ports"));
  }
  if (request.plan_fingerprint() != plan_.fingerprint()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Register: rank ", request.rank(),
        " computed a different partition plan (fingerprint ",
        request.plan_fingerprint(), ", shard has ", plan_.fingerprint(),
        "): the worker and server read different job files"));
  }
  return absl::OkStatus();
}

absl::Status RequestChecks::InitialValues(const PushView& request) const {
  RETURN_IF_ERROR(RegisteredWorker("Initialize", request.job_id, request.rank));
  if (!initial_values_from_rank0_) {
    return absl::FailedPreconditionError(
        "Initialize: the job's servers draw the initial values themselves "
        "(model.initial_values is not rank0)");
  }
  if (request.rank != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Initialize: rank ", request.rank,
                     " sent initial values; only rank 0's are the job's"));
  }
  if (!request.rows.empty()) {
    return absl::InvalidArgumentError(
        "Initialize: embedding rows have no initial values to send");
  }
  for (const ChunkView& chunk : request.chunks) {
    if (!chunk.indices.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Initialize: chunk ", chunk.chunk_index, " of tensor ",
          chunk.tensor_id, " is sparse; initial values are dense"));
    }
  }
  return absl::OkStatus();
}

absl::Status RequestChecks::Worker(const char* rpc, const std::string& job_id,
                                   uint32_t rank) const {
  if (job_id != job_id_) {
    return absl::FailedPreconditionError(
        absl::StrCat(rpc, ": job_id '", QuoteClientBytes(job_id),
                     "' does not match this shard's job '", job_id_, "'"));
  }
  if (rank >= static_cast<uint32_t>(num_workers_)) {
    return absl::InvalidArgumentError(absl::StrCat(
        rpc, ": rank ", rank, " is outside [0, ", num_workers_, ")"));
  }
  return admit_ ? admit_(rpc) : absl::OkStatus();
}

absl::Status RequestChecks::RegisteredWorker(const char* rpc,
                                             const std::string& job_id,
                                             uint32_t rank) const {
  RETURN_IF_ERROR(Worker(rpc, job_id, rank));
  if (!workers_.IsRegistered(static_cast<int>(rank))) {
    return absl::AbortedError(
        absl::StrCat(rpc, ": rank ", rank, " has not registered with shard ",
                     shard_id_, " (Register with join first)"));
  }
  return absl::OkStatus();
}

absl::Status RequestChecks::Chunk(const ChunkView& chunk, int* local) const {
  const int global = plan_.Find(chunk.tensor_id, chunk.chunk_index);
  *local = global < 0 ? -1 : store_.LocalIndex(global);
  const std::string where = absl::StrCat("Push: chunk ", chunk.chunk_index,
                                         " of tensor ", chunk.tensor_id);
  if (*local < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " is not owned by shard ", shard_id_));
  }
  const ChunkSpec& spec = store_.chunk_spec(*local);
  return CheckChunkPayload(
      chunk, spec.length, spec.offset,
      absl::StrCat(where, " (", spec_.tensors[spec.tensor_id].name, ")"));
}

absl::Status RequestChecks::Gather(const char* rpc, uint32_t rank,
                                   absl::Span<const ChunkView> chunks,
                                   ChunkSet* out, bool whole) const {
  const int n = store_.num_chunks();
  if (whole && chunks.size() != static_cast<size_t>(n)) {
    return absl::InvalidArgumentError(
        absl::StrCat(rpc, ": rank ", rank, " sent ", chunks.size(),
                     " chunks; shard ", shard_id_, " owns ", n));
  }
  out->values.assign(n, {});
  out->locals.clear();
  out->storage.clear();
  out->storage.reserve(n);  // No reallocation: values point into it.
  std::vector<bool> seen(n, false);
  for (const ChunkView& chunk : chunks) {
    int local = chunk.checked_local;
    if (local < 0) {
      RETURN_IF_ERROR(Chunk(chunk, &local));
    }
    if (seen[local]) {
      return absl::InvalidArgumentError(absl::StrCat(
          rpc, ": chunk ", chunk.chunk_index, " of tensor ", chunk.tensor_id,
          " (", spec_.tensors[chunk.tensor_id].name, ") appears twice"));
    }
    seen[local] = true;
    out->locals.push_back(local);
    const int64_t length = store_.chunk_spec(local).length;
    out->storage.emplace_back();
    out->values[local] = ChunkGradient(chunk, length, &out->storage.back());
    out->bytes += WireBytes(chunk);
    out->float32_bytes += static_cast<uint64_t>(length) * kElementBytes;
  }
  return absl::OkStatus();
}

absl::Status RequestChecks::Chunks(absl::Span<ChunkView> chunks) const {
  for (ChunkView& chunk : chunks) {
    int local;
    RETURN_IF_ERROR(Chunk(chunk, &local));
    chunk.checked_local = local;
  }
  return absl::OkStatus();
}

absl::Status RequestChecks::PullDtype(const char* rpc, int dtype) {
  if (dtype == proto::DTYPE_UNSPECIFIED || dtype == proto::DTYPE_FLOAT32 ||
      dtype == proto::DTYPE_FLOAT16) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(rpc, ": dtype ", dtype,
                   "; expected DTYPE_FLOAT32 (or unset) or DTYPE_FLOAT16"));
}

absl::Status RequestChecks::EpochReport(
    const proto::ReportEpochRequest& request) const {
  if (request.epoch() < 1 || request.epoch() > static_cast<uint32_t>(epochs_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReportEpoch: epoch ", request.epoch(), " is outside [1, ",
                     epochs_, "]"));
  }
  if (request.test_correct() > request.test_total()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReportEpoch: test_correct ", request.test_correct(),
                     " is more than test_total ", request.test_total()));
  }
  for (auto [field, value] :
       {std::pair{"train_loss_sum", request.train_loss_sum()},
        std::pair{"train_seconds", request.train_seconds()}}) {
    if (!std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ReportEpoch: ", field, " ", value, " must be finite and >= 0"));
    }
  }
  return TestScores(request);
}

absl::Status RequestChecks::TestScores(
    const proto::ReportEpochRequest& request) {
  const int positives = request.test_positives_by_score_size();
  const int negatives = request.test_negatives_by_score_size();
  if (positives == 0 && negatives == 0) {
    if (request.test_loss_sum() != 0) {
      return absl::InvalidArgumentError(
          "ReportEpoch: test_loss_sum is set without the test scores "
          "(test_positives_by_score, test_negatives_by_score)");
    }
    return absl::OkStatus();
  }
  for (auto [field, size] : {std::pair{"test_positives_by_score", positives},
                             std::pair{"test_negatives_by_score", negatives}}) {
    if (size != kScoreBins) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ReportEpoch: ", field, " holds ", size, " counts; expected ",
          kScoreBins, " (one per score bin) or, with the other, none"));
    }
  }
  // Summed in long double: no count of uint64s wraps it round to
  // test_total.
  long double scored = 0;
  for (int b = 0; b < kScoreBins; ++b) {
    scored += static_cast<long double>(request.test_positives_by_score(b)) +
              request.test_negatives_by_score(b);
  }
  if (scored != static_cast<long double>(request.test_total())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReportEpoch: the test scores count ", static_cast<double>(scored),
        " samples; test_total is ", request.test_total()));
  }
  if (!std::isfinite(request.test_loss_sum()) || request.test_loss_sum() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReportEpoch: test_loss_sum ", request.test_loss_sum(),
                     " must be finite and >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckPeerCall(const char* rpc, const PeerIdentity& call,
                           const PeerIdentity& own) {
  if (call.job_id == own.job_id && call.shard == own.shard &&
      call.launch == own.launch) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(rpc, ": job '", QuoteClientBytes(call.job_id), "' shard ",
                   call.shard, " launch '", QuoteClientBytes(call.launch),
                   "' reached this replica of job '", own.job_id, "' launch '",
                   own.launch, "'"));
}

absl::Status CheckReplicaState(const proto::ReplicaState& state,
                               uint64_t plan_fingerprint,
                               const std::string& policy, int num_workers) {
  if (state.plan_fingerprint() != plan_fingerprint ||
      state.policy() != policy) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Replicate: state of plan ", state.plan_fingerprint(), " policy '",
        QuoteClientBytes(state.policy()), "'; this replica serves plan ",
        plan_fingerprint, " policy '", policy, "'"));
  }
  const int n = num_workers;
  if (state.clocks_size() != n || state.last_accepted_size() != n ||
      state.live_size() != n || state.registered_size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("Replicate: state: ", state.clocks_size(), " clocks, ",
                     state.last_accepted_size(), " last accepted, ",
                     state.live_size(), " live and ", state.registered_size(),
                     " registered flags; the job has ", n, " workers"));
  }
  if (state.rows_applied_size() != 0 && state.rows_applied_size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Replicate: state: ", state.rows_applied_size(),
        " rows_applied; expected none or one per worker (", n, ")"));
  }
  if (state.store_state().empty()) {
    return absl::InvalidArgumentError("Replicate: state: store_state is empty");
  }
  return absl::OkStatus();
}

}  // namespace paramd
