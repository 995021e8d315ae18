#include "server/shard/proto_convert.h"

#include <algorithm>

namespace paramd {

EpochReport ToEpochReport(const proto::ReportEpochRequest& request) {
  EpochReport r;
  r.epoch = static_cast<int>(request.epoch());
  r.train_loss_sum = request.train_loss_sum();
  r.train_samples = request.train_samples();
  r.train_seconds = request.train_seconds();
  r.test_correct = request.test_correct();
  r.test_total = request.test_total();
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
  // Clamped: a request may land between reading `now` and the snapshot.
  ws->set_last_seen_seconds_ago(
      w.registered ? std::max(0.0, absl::ToDoubleSeconds(now - w.last_seen))
                   : -1);
}

void FillWorkersStatus(const std::vector<WorkerInfo>& workers,
                       const std::vector<PolicyWorker>& clocks,
                       const JobMetrics& metrics, absl::Time now,
                       proto::ShardStatus* status) {
  uint64_t fastest = 0;
  for (const PolicyWorker& w : clocks) fastest = std::max(fastest, w.clock);
  uint64_t pushes = 0, pulls = 0, bytes_in = 0, bytes_out = 0;
  std::vector<bool> counted(workers.size());
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    const WorkerInfo& w = workers[rank];
    FillWorkerStatus(static_cast<int>(rank), w, clocks[rank], fastest, now,
                     status->add_workers());
    counted[rank] = clocks[rank].live || w.finished;
    pushes += w.pushes;
    pulls += w.pulls;
    bytes_in += w.bytes_in;
    bytes_out += w.bytes_out;
  }
  status->set_pushes(pushes);
  status->set_pulls(pulls);
  status->set_bytes_in(bytes_in);
  status->set_bytes_out(bytes_out);
  for (const EpochSummary& e : metrics.Summaries(counted)) {
    FillEpochMetrics(e, status->add_epochs());
  }
}

}  // namespace paramd
