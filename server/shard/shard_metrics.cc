#include "server/shard/shard_metrics.h"

#include "absl/strings/str_cat.h"
#include "common/metrics/metric_families.h"

namespace paramd {

namespace {

using T = MetricType;

// A family of one sample without labels of its own.
void One(MetricFamilies& text, const char* name, T type, const char* help,
         double value) {
  text.Declare(name, type, help);
  text.Add(name, {}, value);
}

// What the shard holds and the traffic it has served.
void AddShardState(const proto::ShardStatus& s, MetricFamilies& text) {
  auto one = [&](const char* name, T type, const char* help, double value) {
    One(text, name, type, help, value);
  };
  text.Declare("paramd_shard_info", T::Gauge,
               "Always 1; its labels say the shard's policy and how many "
               "shards the job has.");
  text.Add(
      "paramd_shard_info",
      {{"policy", s.policy()}, {"num_shards", absl::StrCat(s.num_shards())}},
      1);
  one("paramd_version", T::Gauge,
      "Version of the shard's parameters (updates applied).",
      static_cast<double>(s.version()));
  one("paramd_parameter_bytes", T::Gauge,
      "Bytes of parameters this shard holds.", static_cast<double>(s.bytes()));
  one("paramd_chunks", T::Gauge, "Chunks of tensors this shard owns.",
      s.chunks());
  one("paramd_pushes_total", T::Counter, "Gradient pushes applied.",
      static_cast<double>(s.pushes()));
  one("paramd_pulls_total", T::Counter, "Parameter pulls served.",
      static_cast<double>(s.pulls()));
  one("paramd_received_bytes_total", T::Counter,
      "Gradient bytes received in applied pushes.",
      static_cast<double>(s.bytes_in()));
  one("paramd_received_float32_bytes_total", T::Counter,
      "Gradient bytes of applied pushes as float32 would carry them "
      "(received / this = the wire's compression).",
      static_cast<double>(s.bytes_in_float32()));
  one("paramd_sent_bytes_total", T::Counter, "Parameter bytes sent in pulls.",
      static_cast<double>(s.bytes_out()));
  one("paramd_shared_memory_received_bytes_total", T::Counter,
      "Gradient bytes same-host workers' steps put in shared memory instead "
      "of the socket.",
      static_cast<double>(s.shared_memory_bytes_in()));
  one("paramd_shared_memory_sent_bytes_total", T::Counter,
      "Parameter bytes this shard's replies put in same-host workers' "
      "shared memory instead of the socket.",
      static_cast<double>(s.shared_memory_bytes_out()));
  one("paramd_uptime_seconds", T::Gauge, "Seconds since the shard started.",
      s.uptime_seconds());
  if (s.staleness_bound() >= 0) {
    one("paramd_staleness_bound", T::Gauge,
        "The SSP bound: clocks a worker may run ahead of the slowest.",
        static_cast<double>(s.staleness_bound()));
  }
}

// Time spent in pushes and pulls.
void AddShardTimes(const ShardStats& stats, int waiting, MetricFamilies& text) {
  text.Declare("paramd_push_seconds", T::Histogram,
               "Time a push spends in the shard, from its checks to its "
               "update applied.");
  text.AddHistogram("paramd_push_seconds", {}, stats.push_seconds().Snapshot());
  text.Declare("paramd_pull_seconds", T::Histogram,
               "Time a pull spends in the shard, waiting included.");
  text.AddHistogram("paramd_pull_seconds", {}, stats.pull_seconds().Snapshot());
  text.Declare("paramd_pull_wait_seconds", T::Histogram,
               "Time a pull waits for the version its policy requires.");
  text.AddHistogram("paramd_pull_wait_seconds", {},
                    stats.pull_wait_seconds().Snapshot());
  text.Declare("paramd_pulls_waiting", T::Gauge,
               "Pulls waiting for a version now.");
  text.Add("paramd_pulls_waiting", {}, waiting);
}

// Per rank, and summed over ranks.
void AddWorkers(const proto::ShardStatus& s, MetricFamilies& text) {
  text.Declare("paramd_live_workers", T::Gauge,
               "Workers holding a lease on this shard.");
  text.Declare("paramd_worker_up", T::Gauge,
               "1 while the rank holds a lease; its state is a label.");
  text.Declare("paramd_worker_clock", T::Gauge,
               "The rank's clock: steps it has pushed.");
  text.Declare("paramd_worker_staleness", T::Gauge,
               "Clocks the rank is behind the fastest worker.");
  text.Declare("paramd_worker_last_loss", T::Gauge,
               "Loss of the rank's last pushed batch.");
  text.Declare("paramd_worker_registrations_total", T::Counter,
               "Worker processes seen for the rank (more than 1 after a "
               "restart).");
  text.Declare("paramd_worker_pushes_total", T::Counter,
               "Pushes of the rank applied.");
  text.Declare("paramd_worker_divergences_total", T::Counter,
               "The rank's pushes the guard found diverging.");
  text.Declare("paramd_worker_push_staleness", T::Gauge,
               "Mean staleness of the rank's accepted pushes (1: fresh).");
  text.Declare("paramd_worker_stalling", T::Gauge,
               "1 while a stalled pull (waiting longer than "
               "liveness.stall_warn_seconds) waits for the rank.");
  text.Declare("paramd_worker_restarts_total", T::Counter,
               "Worker restarts seen across ranks (registrations after each "
               "rank's first).");
  int live = 0;
  uint64_t restarts = 0;
  for (const proto::WorkerStatus& w : s.workers()) {
    live += w.state() == "live";
    if (w.registrations() > 1) restarts += w.registrations() - 1;
    const MetricLabels rank = {{"rank", absl::StrCat(w.rank())}};
    MetricLabels with_state = rank;
    with_state.push_back({"state", w.state()});
    text.Add("paramd_worker_up", with_state, w.state() == "live" ? 1 : 0);
    text.Add("paramd_worker_clock", rank, static_cast<double>(w.clock()));
    text.Add("paramd_worker_staleness", rank,
             static_cast<double>(w.staleness()));
    text.Add("paramd_worker_last_loss", rank, w.last_loss());
    text.Add("paramd_worker_registrations_total", rank,
             static_cast<double>(w.registrations()));
    text.Add("paramd_worker_pushes_total", rank,
             static_cast<double>(w.pushes()));
    text.Add("paramd_worker_stalling", rank, w.stalling() ? 1 : 0);
    text.Add("paramd_worker_push_staleness", rank, w.mean_push_staleness());
    text.Add("paramd_worker_divergences_total", rank,
             static_cast<double>(w.divergences()));
  }
  text.Add("paramd_live_workers", {}, live);
  text.Add("paramd_worker_restarts_total", {}, static_cast<double>(restarts));
}

// Pulls waiting longer than liveness.stall_warn_seconds, and the gradient
// guards' counts.
void AddStalls(const proto::ShardStatus& s, MetricFamilies& text) {
  int stalled = 0;
  for (const proto::WaitingPull& p : s.waiting()) stalled += p.stalled();
  One(text, "paramd_stalled_pulls", T::Gauge,
      "Pulls waiting longer than liveness.stall_warn_seconds now.", stalled);
  One(text, "paramd_late_pushes_total", T::Counter,
      "Pushes acknowledged and dropped because their sync round had closed "
      "without them (policy.backup_workers).",
      static_cast<double>(s.late_pushes()));
  One(text, "paramd_clipped_pushes_total", T::Counter,
      "Pushes scaled down to optimizer.clip_norm.",
      static_cast<double>(s.clipped_pushes()));
  One(text, "paramd_divergences_total", T::Counter,
      "Pushes the guard found diverging (loss spike or not finite).",
      static_cast<double>(s.divergences()));
  One(text, "paramd_guard_stopped", T::Gauge,
      "1 once guard.on_diverge stop refuses the job's pushes.",
      s.guard_stopped().empty() ? 0 : 1);
  One(text, "paramd_stall_warnings_total", T::Counter,
      "Stall warnings logged (each stalled pull after 1x, 2x, 4x, ... the "
      "stall time).",
      static_cast<double>(s.stall_warnings()));
}

// A binary classifier's epochs: AUC and log loss (no family without one).
void AddEpochScores(const proto::ShardStatus& s, MetricFamilies& text) {
  bool declared = false;
  for (const proto::EpochMetrics& e : s.epochs()) {
    if (!e.test_scored()) continue;
    if (!declared) {
      text.Declare("paramd_epoch_test_auc", T::Gauge,
                   "Test AUC after the epoch (a binary classifier), over "
                   "every rank's share.");
      text.Declare("paramd_epoch_test_log_loss", T::Gauge,
                   "Test log loss after the epoch (a binary classifier).");
      declared = true;
    }
    const MetricLabels epoch = {{"epoch", absl::StrCat(e.epoch())}};
    text.Add("paramd_epoch_test_auc", epoch, e.test_auc());
    text.Add("paramd_epoch_test_log_loss", epoch, e.test_log_loss());
  }
}

// Training progress (shard 0 keeps the job's epochs).
void AddEpochs(const proto::ShardStatus& s, MetricFamilies& text) {
  auto one = [&](const char* name, T type, const char* help, double value) {
    One(text, name, type, help, value);
  };
  if (s.epochs_size() > 0) {
    text.Declare("paramd_epoch_train_loss", T::Gauge,
                 "Mean training loss of the epoch over every worker.");
    text.Declare("paramd_epoch_test_accuracy", T::Gauge,
                 "Test accuracy after the epoch, over every rank's share.");
    text.Declare("paramd_epoch_samples_per_second", T::Gauge,
                 "Training samples per second of the epoch, all workers.");
    for (const proto::EpochMetrics& e : s.epochs()) {
      const MetricLabels epoch = {{"epoch", absl::StrCat(e.epoch())}};
      text.Add("paramd_epoch_train_loss", epoch, e.train_loss());
      text.Add("paramd_epoch_test_accuracy", epoch, e.test_accuracy());
      text.Add("paramd_epoch_samples_per_second", epoch,
               e.samples_per_second());
    }
    AddEpochScores(s, text);
    const proto::EpochMetrics& last = s.epochs(s.epochs_size() - 1);
    one("paramd_epoch", T::Gauge, "The last epoch any worker reported.",
        last.epoch());
    one("paramd_train_loss", T::Gauge, "Training loss of the last epoch.",
        last.train_loss());
    one("paramd_test_accuracy", T::Gauge, "Test accuracy of the last epoch.",
        last.test_accuracy());
  }
}

// Embedding tables (model.embeddings), by table.
void AddTables(const proto::ShardStatus& s, MetricFamilies& text) {
  if (s.tables_size() > 0) {
    text.Declare("paramd_table_rows", T::Gauge,
                 "Rows of the table this shard holds (ever pushed).");
    text.Declare("paramd_table_bytes", T::Gauge,
                 "Memory of the table's rows, optimizer state and index.");
    text.Declare("paramd_table_rows_pulled_total", T::Counter,
                 "Rows of the table served by PullRows.");
    text.Declare("paramd_table_rows_pushed_total", T::Counter,
                 "Row gradients of the table accepted.");
    text.Declare("paramd_table_rows_not_admitted_total", T::Counter,
                 "Row gradients dropped: the table's admission did not "
                 "take their id.");
    text.Declare("paramd_table_rows_evicted_total", T::Counter,
                 "Rows dropped by the table's eviction.");
    for (const proto::TableStatus& t : s.tables()) {
      const MetricLabels table = {{"table", t.name()}};
      text.Add("paramd_table_rows", table, static_cast<double>(t.rows()));
      text.Add("paramd_table_bytes", table, static_cast<double>(t.bytes()));
      text.Add("paramd_table_rows_pulled_total", table,
               static_cast<double>(t.rows_pulled()));
      text.Add("paramd_table_rows_pushed_total", table,
               static_cast<double>(t.rows_pushed()));
      text.Add("paramd_table_rows_not_admitted_total", table,
               static_cast<double>(t.rows_not_admitted()));
      text.Add("paramd_table_rows_evicted_total", table,
               static_cast<double>(t.rows_evicted()));
    }
  }
}

void AddRecovery(const proto::ShardStatus& s, MetricFamilies& text) {
  auto one = [&](const char* name, T type, const char* help, double value) {
    One(text, name, type, help, value);
  };
  one("paramd_restored", T::Gauge,
      "1 when this process started from a checkpoint.",
      s.restored_from().empty() ? 0 : 1);
  if (!s.checkpoint_path().empty()) {
    one("paramd_checkpoint_age_seconds", T::Gauge,
        "Seconds since the newest checkpoint was written or restored.",
        s.checkpoint_age_seconds());
    one("paramd_checkpoint_version", T::Gauge,
        "Version of the newest checkpoint.",
        static_cast<double>(s.checkpoint_version()));
  }
  if (!s.has_replica()) return;
  const proto::ReplicaStatus& r = s.replica();
  text.Declare("paramd_replica_info", T::Gauge,
               "Always 1; its labels say this process's part in its "
               "shard's replication (primary, backup, replaced).");
  text.Add("paramd_replica_info", {{"role", r.role()}}, 1);
  one("paramd_replica_term", T::Gauge,
      "The shard's replication term (up by one at every take-over).",
      static_cast<double>(r.term()));
  one("paramd_replica_in_sync", T::Gauge,
      "Primary: 1 when its backup holds every acknowledged step.",
      r.peer_in_sync() ? 1 : 0);
  one("paramd_replica_lag_versions", T::Gauge,
      "Primary: versions applied here that its backup does not hold.",
      static_cast<double>(r.lag_versions()));
  one("paramd_replica_held_version", T::Gauge,
      "Backup: the version of the primary's state it holds.",
      static_cast<double>(r.held_version()));
  one("paramd_replica_takeovers_total", T::Counter,
      "Times this process took its shard over from the primary.",
      static_cast<double>(r.takeovers()));
}

}  // namespace

std::vector<prometheus::MetricFamily> ShardMetrics(const Shard& shard,
                                                   absl::Time process_started) {
  proto::ShardStatus s;
  shard.GetStatus(&s);
  MetricFamilies text(
      {{"paramd_job", s.job_id()}, {"shard", absl::StrCat(s.shard())}});
  AddShardState(s, text);
  AddShardTimes(shard.stats(), s.waiting_size(), text);
  text.Declare("paramd_push_staleness", T::Histogram,
               "Staleness of accepted pushes: versions between the one the "
               "rank pulled and the one its push made (1: fresh).");
  text.AddHistogram("paramd_push_staleness", {},
                    shard.policy().push_staleness().Snapshot());
  AddWorkers(s, text);
  AddStalls(s, text);
  AddEpochs(s, text);
  AddTables(s, text);
  AddRecovery(s, text);
  AddProcessMetrics(text, process_started);
  return text.Take();
}

}  // namespace paramd
