#include "server/shard/proto_convert.h"

#include <algorithm>

namespace paramd {

PushView ToPushView(const proto::PushRequest& request) {
  PushView view;
  view.job_id = request.job_id();
  view.rank = request.rank();
  view.clock = request.clock();
  view.loss = request.loss();
  for (const proto::TensorChunk& chunk : request.chunks()) {
    view.chunks.push_back(ChunkView{chunk.tensor_id(), chunk.chunk_index(),
                                    chunk.dtype(), chunk.data(),
                                    chunk.indices()});
  }
  for (const proto::RowBlock& rows : request.rows()) {
    view.rows.push_back(
        RowView{rows.table(), rows.dtype(), rows.ids(), rows.data()});
  }
  return view;
}

PullRowsView ToPullRowsView(const proto::PullRowsRequest& request) {
  PullRowsView view;
  view.job_id = request.job_id();
  view.rank = request.rank();
  view.clock = request.clock();
  view.table = request.table();
  view.dtype = request.dtype();
  view.ids = request.ids();
  return view;
}

void FillPullResponse(const ParamSnapshot& snapshot, const ShardStore& store,
                      bool half, proto::PullResponse* out) {
  out->set_version(snapshot.version);
  for (size_t i = 0; i < snapshot.params.size(); ++i) {
    const ChunkSpec& spec = store.chunk_spec(static_cast<int>(i));
    proto::TensorChunk* chunk = out->add_chunks();
    chunk->set_tensor_id(spec.tensor_id);
    chunk->set_chunk_index(spec.chunk_index);
    chunk->set_dtype(half ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32);
    if (half) {
      const std::vector<uint16_t>& h = snapshot.Halves()[i];
      chunk->set_data(h.data(), h.size() * sizeof(uint16_t));
    } else {
      chunk->set_data(snapshot.params[i].data(),
                      snapshot.params[i].size() * sizeof(float));
    }
  }
}

void FillPullRowsResponse(const RowsReply& reply,
                          proto::PullRowsResponse* out) {
  out->set_version(reply.version);
  out->set_dtype(static_cast<proto::DType>(reply.dtype));
  const absl::string_view bytes = reply.bytes();
  out->set_data(bytes.data(), bytes.size());
}

EpochReport ToEpochReport(const proto::ReportEpochRequest& request) {
  EpochReport r;
  r.epoch = static_cast<int>(request.epoch());
  r.train_loss_sum = request.train_loss_sum();
  r.train_samples = request.train_samples();
  r.train_seconds = request.train_seconds();
  r.test_correct = request.test_correct();
  r.test_total = request.test_total();
  r.test_loss_sum = request.test_loss_sum();
  // RequestChecks::EpochReport has checked the lists' lengths.
  r.test_scores.Assign({request.test_positives_by_score().begin(),
                        request.test_positives_by_score().end()},
                       {request.test_negatives_by_score().begin(),
                        request.test_negatives_by_score().end()});
  return r;
}

void FillEpochMetrics(const EpochSummary& e, proto::EpochMetrics* m) {
  m->set_epoch(e.epoch);
  m->set_workers_reported(e.workers_reported);
  m->set_complete(e.complete);
  m->set_train_loss(e.train_loss);
  m->set_test_accuracy(e.test_accuracy);
  m->set_test_total(e.test_total);
  m->set_train_samples(e.train_samples);
  m->set_samples_per_second(e.samples_per_second);
  if (e.test_auc.has_value()) {
    m->set_test_scored(true);
    m->set_test_auc(e.test_auc->auc);
    m->set_test_auc_error(e.test_auc->max_error);
    m->set_test_log_loss(e.test_log_loss);
  }
}

void FillHistogram(const HistogramSnapshot& snapshot,
                   proto::CountHistogram* out) {
  for (double bound : snapshot.upper_bounds) out->add_upper_bounds(bound);
  for (uint64_t n : snapshot.cumulative) out->add_cumulative(n);
  out->set_sum(snapshot.sum);
  out->set_count(snapshot.count);
}

void FillWorkerStatus(int rank, const WorkerInfo& w, const PolicyWorker& policy,
                      uint64_t fastest_clock, absl::Time now,
                      proto::WorkerStatus* ws) {
  ws->set_rank(static_cast<uint32_t>(rank));
  ws->set_registered(w.registered);
  ws->set_state(w.finished     ? "finished"
                : !policy.live ? "dead"
                : w.registered ? "live"
                               : "waiting");
  ws->set_clock(policy.clock);
  ws->set_staleness(fastest_clock - policy.clock);
  ws->set_pushes(w.pushes);
  ws->set_pulls(w.pulls);
  ws->set_bytes_in(w.bytes_in);
  ws->set_bytes_out(w.bytes_out);
  ws->set_last_loss(w.last_loss);
  ws->set_registrations(w.registrations);
  ws->set_late_pushes(policy.dropped);
  ws->set_mean_push_staleness(policy.accepted == 0
                                  ? 0.0
                                  : static_cast<double>(policy.staleness_sum) /
                                        static_cast<double>(policy.accepted));
  // Clamped: a request may land between reading `now` and the snapshot.
  auto ago = [now](absl::Time then) {
    return then == absl::InfinitePast()
               ? -1.0
               : std::max(0.0, absl::ToDoubleSeconds(now - then));
  };
  ws->set_last_seen_seconds_ago(w.registered ? ago(w.last_seen) : -1);
  ws->set_last_push_seconds_ago(ago(w.last_push));
  ws->set_last_heartbeat_seconds_ago(ago(w.last_heartbeat));
}

void FillWorkersStatus(const std::vector<WorkerInfo>& workers,
                       const std::vector<PolicyWorker>& clocks,
                       const JobMetrics& metrics, absl::Time now,
                       proto::ShardStatus* status) {
  uint64_t fastest = 0;
  for (const PolicyWorker& w : clocks) fastest = std::max(fastest, w.clock);
  uint64_t pushes = 0, pulls = 0, bytes_in = 0, bytes_out = 0;
  std::vector<bool> counted(workers.size());
  uint64_t late = 0;
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    const WorkerInfo& w = workers[rank];
    FillWorkerStatus(static_cast<int>(rank), w, clocks[rank], fastest, now,
                     status->add_workers());
    counted[rank] = clocks[rank].live || w.finished;
    pushes += w.pushes;
    pulls += w.pulls;
    bytes_in += w.bytes_in;
    bytes_out += w.bytes_out;
    late += clocks[rank].dropped;
  }
  status->set_late_pushes(late);
  status->set_pushes(pushes);
  status->set_pulls(pulls);
  status->set_bytes_in(bytes_in);
  status->set_bytes_out(bytes_out);
  for (const EpochSummary& e : metrics.Summaries(counted)) {
    FillEpochMetrics(e, status->add_epochs());
  }
}

void FillReplicaState(uint64_t plan_fingerprint, const char* policy,
                      PolicyState* state, const WorkerRegistry& workers,
                      std::string metrics_state, proto::ReplicaState* out) {
  out->set_plan_fingerprint(plan_fingerprint);
  out->set_policy(policy);
  out->set_version(state->version);
  for (size_t r = 0; r < state->clocks.size(); ++r) {
    out->add_clocks(state->clocks[r]);
    out->add_last_accepted(state->last_accepted[r]);
    out->add_live(state->live[r]);
    out->add_registered(workers.IsRegistered(static_cast<int>(r)));
  }
  for (int64_t c : state->rows_applied) out->add_rows_applied(c);
  out->set_store_state(std::move(state->store_state));
  out->set_metrics_state(std::move(metrics_state));
}

PolicyState ToPolicyState(const proto::ReplicaState& held) {
  PolicyState state;
  state.version = held.version();
  state.clocks.assign(held.clocks().begin(), held.clocks().end());
  state.last_accepted.assign(held.last_accepted().begin(),
                             held.last_accepted().end());
  state.rows_applied.assign(held.rows_applied().begin(),
                            held.rows_applied().end());
  state.store_state = held.store_state();
  return state;
}

}  // namespace paramd
