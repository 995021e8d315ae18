#include "tools/ctl/job_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/config/job_config.h"
#include "common/config/job_file.h"
#include "tools/ctl/local_coordinator.h"
#include "tools/ctl/local_secrets.h"
#include "tools/ctl/rpc/status_client.h"
#include "tools/ctl/run_folder.h"
#include "tools/ctl/run_report.h"
#include "tools/ctl/server_fleet.h"
#include "tools/ctl/server_watch.h"
#include "tools/ctl/stop_signals.h"
#include "tools/ctl/supervisor.h"
#include "tools/ctl/worker_command.h"

namespace paramd {
namespace {

constexpr absl::Duration kStartupTimeout = absl::Seconds(60);
constexpr absl::Duration kStopGrace = absl::Seconds(5);
constexpr absl::Duration kProgressEvery = absl::Seconds(1);
// How long a server may take to answer the status call of the watch, and
// the shortest silence it takes for dead (a short lease is the workers').
constexpr absl::Duration kProbeTimeout = absl::Seconds(1);
constexpr absl::Duration kMinSilence = absl::Seconds(5);

void Say(const std::string& line) {
  std::printf("paramctl: %s\n", line.c_str());
  std::fflush(stdout);
}

std::string FormatDuration(double seconds) {
  const int s = static_cast<int>(seconds + 0.5);
  return s >= 60 ? absl::StrFormat("%dm%02ds", s / 60, s % 60)
                 : absl::StrFormat("%ds", s);
}

// 16 random hex digits.
std::string NewLaunchId() {
  std::random_device random;
  return absl::StrFormat("%08x%08x", random(), random());
}

class JobRun {
 public:
  JobRun(const RunOptions& options, JobConfig config, JobSecurity security)
      : options_(options),
        config_(std::move(config)),
        security_(std::move(security)),
        launch_(NewLaunchId()),
        started_(absl::Now()),
        watch_(config_.num_shards() * config_.replication.factor,
               std::max(kMinSilence,
                        absl::Seconds(config_.liveness.lease_seconds))) {}

  int Run() {
    absl::StatusOr<std::unique_ptr<RunFolder>> folder = RunFolder::Create();
    if (!folder.ok()) {
      Say(std::string(folder.status().message()));
      return 1;
    }
    folder_ = *std::move(folder);
    if (folder_->swept() > 0) {
      Say(absl::StrCat("removed ", folder_->swept(),
                       " run folder(s) left by paramctl runs that were "
                       "killed"));
    }
    checkpoint_dir_ = config_.checkpoint.dir;
    if (checkpoint_dir_.empty() && config_.checkpoint.enabled) {
      // The job names no folder: each shard checkpoints into the run's
      // own, so that a dead server can still be restarted; it goes with
      // the run.
      run_checkpoints_ = true;
      checkpoint_dir_ = folder_->CheckpointDir();
    }
    if (config_.replication.enabled() && !config_.coordination.enabled()) {
      if (int code = StartCoordinator(); code >= 0) return code;
    }
    fleet_ = std::make_unique<ServerFleet>(
        config_, folder_.get(),
        ServerFleet::Launch{options_.job_path, options_.server_binary, launch_,
                            options_.log_level, checkpoint_dir_, etcd_});
    const int code = RunInDir();
    folder_.reset();
    return code;
  }

 private:
  // A replicated job without a coordinator: a local etcd fences its shards
  // when etcd is installed. Returns -1 to go on, else the exit code.
  int StartCoordinator() {
    absl::StatusOr<std::string> etcd =
        StartLocalFence(sup_, folder_->path(), kStartupTimeout,
                        [this](const std::string& line) { Say(line); });
    if (!etcd.ok()) return Fail(std::string(etcd.status().message()));
    etcd_ = *etcd;
    return -1;
  }

  int RunInDir() {
    Say(absl::StrFormat(
        "job '%s': %d server(s), %d worker(s), policy %s, %d epoch(s)",
        config_.job_id, config_.num_shards(), config_.num_workers,
        PolicyName(config_.policy.type), config_.training.epochs));
    if (run_checkpoints_) {
      Say(absl::StrCat(
          "checkpoints every ", config_.checkpoint.every_steps,
          " versions in the run's folder ", checkpoint_dir_,
          ", removed when the run ends (a dead server restarts from them; "
          "checkpoint.dir keeps them, checkpoint.enabled: false turns "
          "them off)"));
    }
    // With replicas the backups start first: each primary is then told
    // its backup's address.
    const int first = config_.replication.enabled() ? fleet_->num_shards() : 0;
    for (auto [begin, end] :
         {std::pair{first, fleet_->size()}, std::pair{0, first}}) {
      for (int slot = begin; slot < end; ++slot) {
        procs_.push_back(Proc{fleet_->Name(slot), /*server=*/true, slot});
        if (!Start(procs_.back(), options_.fresh)) return 1;
      }
      if (int code = AwaitPorts(begin, end); code >= 0) return code;
    }
    Say(absl::StrCat("servers up at ",
                     absl::StrJoin(fleet_->addresses(), ", ")));
    for (int r = 0; r < config_.num_workers; ++r) {
      procs_.push_back(Proc{absl::StrCat("worker ", r), /*server=*/false, r});
      if (!Start(procs_.back(), false)) return 1;
    }
    workers_started_ = absl::Now();
    return Supervise();
  }

  // A server or worker of the job, and how often it was restarted.
  struct Proc {
    std::string name;  // "server 0", "worker 1"
    bool server = false;
    int id = 0;      // The server's slot in fleet_, or the rank.
    int index = -1;  // In sup_.
    int restarts = 0;
    bool done = false;  // A worker that finished.
    absl::Time restart_at = absl::InfiniteFuture();
  };

  // Starts `p` (again); a restarted server listens on the port it had, and
  // restores its newest checkpoint. False (having failed the run) when the
  // process cannot be started.
  bool Start(Proc& p, bool fresh) {
    std::vector<std::string> argv;
    if (p.server) {
      argv = fleet_->Argv(p.id, fresh);
    } else {
      argv = WorkerArgv(config_,
                        {options_.job_path, p.id, fleet_->primaries(), launch_,
                         options_.log_level, options_.worker_binary,
                         options_.python_path, fleet_->backups(), etcd_});
    }
    auto index = sup_.Spawn(p.name, argv);
    if (!index.ok()) {
      Fail(std::string(index.status().message()));
      return false;
    }
    p.index = *index;
    p.restart_at = absl::InfiniteFuture();
    if (p.server) watch_.Started(p.id, absl::Now());
    Say(absl::StrCat(p.restarts > 0 ? "restarted " : "started ", p.name,
                     " (pid ", sup_.child(*index).pid, ")"));
    return true;
  }

  Proc* FindProc(int index) {
    for (Proc& p : procs_) {
      if (p.index == index) return &p;
    }
    return nullptr;
  }

  // Restarts every process whose backoff has passed. Returns -1 to go on,
  // else the exit code.
  int RestartDue() {
    const absl::Time now = absl::Now();
    for (Proc& p : procs_) {
      if (p.restart_at <= now && !Start(p, false)) return 1;
    }
    return -1;
  }

  // Waits until the servers of slots [begin, end) wrote their port files.
  // Returns -1 when all are up, else the exit code.
  int AwaitPorts(int begin, int end) {
    const absl::Time deadline = absl::Now() + kStartupTimeout;
    while (!fleet_->ReadPorts(begin, end)) {
      if (int code =
              HandleExits(sup_.Poll(absl::Milliseconds(20), StopSignalFd()));
          code >= 0) {
        return code;
      }
      if (int signo = TakeStopSignal(); signo != 0) return Interrupted(signo);
      if (absl::Now() > deadline) {
        return Fail(absl::StrCat(
            "servers did not start listening within ",
            FormatDuration(absl::ToDoubleSeconds(kStartupTimeout))));
      }
    }
    return -1;
  }

  // Returns -1 to go on, else the exit code. A process that died is
  // restarted after restart.backoff_seconds (doubled each time), up to
  // restart.max times; a server only when it can restore a checkpoint.
  int HandleExits(const std::vector<int>& exited) {
    for (int i : exited) {
      const ChildInfo& c = sup_.child(i);
      Proc* p = FindProc(i);
      const bool clean =
          WIFEXITED(c.wait_status) && WEXITSTATUS(c.wait_status) == 0;
      if (p != nullptr && !p->server && clean) {
        p->done = true;
        ++workers_done_;
        continue;
      }
      const std::string why = absl::StrCat(
          c.name, " (pid ", c.pid, ") ",
          Supervisor::DescribeExit(c.wait_status),
          c.last_line.empty() ? ""
                              : absl::StrCat("; its last line: ", c.last_line));
      if (p == nullptr || workers_started_ == absl::InfinitePast()) {
        return Fail(why);
      }
      if (p->restarts >= config_.restart.max) {
        return Fail(absl::StrCat(why, "; restarted ", p->restarts,
                                 " time(s) already (restart.max ",
                                 config_.restart.max, ")"));
      }
      if (p->server && checkpoint_dir_.empty() &&
          !config_.replication.enabled()) {
        return Fail(absl::StrCat(
            why,
            "; a server is restarted only from a checkpoint, and the "
            "job turns them off (checkpoint.enabled: false)"));
      }
      const absl::Duration wait = absl::Seconds(
          config_.restart.backoff_seconds * (1 << std::min(p->restarts, 10)));
      ++p->restarts;
      ++restarts_;
      p->restart_at = absl::Now() + wait;
      Say(absl::StrCat(why, "; restarting it in ", absl::FormatDuration(wait),
                       " (restart ", p->restarts, " of ", config_.restart.max,
                       ")"));
    }
    return -1;
  }

  int Supervise() {
    absl::Time next_progress = absl::Now() + kProgressEvery;
    while (workers_done_ < config_.num_workers) {
      if (int code =
              HandleExits(sup_.Poll(absl::Milliseconds(200), StopSignalFd()));
          code >= 0) {
        return code;
      }
      if (int signo = TakeStopSignal(); signo != 0) return Interrupted(signo);
      if (int code = RestartDue(); code >= 0) return code;
      if (absl::Now() >= next_progress) {
        // One round of status calls serves the progress lines and the
        // watch over silent servers.
        const std::vector<ServerStatus> status =
            QueryAllStatus(fleet_->addresses(), security_, kProbeTimeout);
        ReportProgress(fleet_->Serving(status)[0].status);
        KillSilentServers(status);
        next_progress = absl::Now() + kProgressEvery;
      }
    }
    ReportProgress(fleet_
                       ->Serving(QueryAllStatus(fleet_->addresses(), security_,
                                                absl::Seconds(2)))[0]
                       .status);
    const bool complete = epochs_.count(config_.training.epochs) > 0;
    MeasurePushBytes();
    std::vector<int> servers;
    for (const Proc& p : procs_) {
      if (p.server) servers.push_back(p.index);
    }
    sup_.Stop(servers, kStopGrace);
    const double wall = absl::ToDoubleSeconds(absl::Now() - started_);
    if (!complete) {
      Say("the workers finished but shard 0 does not hold the last epoch's "
          "metrics");
      return 1;
    }
    const proto::EpochMetrics& last = epochs_.rbegin()->second;
    Say(absl::StrFormat(
        "done: %d epoch(s) in %s, final test accuracy %.4f%s, %.0f "
        "samples/s (median epoch)%s%s",
        config_.training.epochs, FormatDuration(wall), last.test_accuracy(),
        ScorePhrase(last), MedianSamplesPerSecond(epochs_),
        PushBytesPhrase(push_),
        restarts_ == 0 ? "" : absl::StrCat(", ", restarts_, " restart(s)")));
    if (!options_.summary_path.empty()) {
      if (!WriteSummary(wall)) return 1;
      Say(absl::StrCat("summary written to ", options_.summary_path));
    }
    return 0;
  }

  // Given a round of every server's `status`, SIGKILLs each running server
  // that has answered no status call for longer than the lease
  // (ServerWatch): HandleExits then restarts it.
  void KillSilentServers(const std::vector<ServerStatus>& status) {
    std::vector<bool> answered, running;
    std::vector<const Proc*> by_slot(fleet_->size());
    for (const Proc& p : procs_) {
      if (p.server) by_slot[p.id] = &p;
    }
    for (const Proc* p : by_slot) {
      answered.push_back(status[p->id].status.ok());
      running.push_back(p->restart_at == absl::InfiniteFuture());
    }
    const absl::Time now = absl::Now();
    for (int slot : watch_.Observe(answered, running, now)) {
      const ChildInfo& c = sup_.child(by_slot[slot]->index);
      Say(absl::StrFormat(
          "%s (pid %d) answered no status call for %.1fs (more "
          "than %s: liveness.lease_seconds, at least 5s): killing it, to "
          "restart it",
          fleet_->Name(slot), c.pid,
          absl::ToDoubleSeconds(watch_.Silence(slot, now)),
          absl::FormatDuration(watch_.lease())));
      kill(c.pid, SIGKILL);
      watch_.Started(slot, now);  // Not again before it is restarted.
    }
  }

  // The bytes one worker step pushes, from every shard's counters.
  void MeasurePushBytes() {
    push_ = PushBytesPerStep(fleet_->Serving(
        QueryAllStatus(fleet_->addresses(), security_, absl::Seconds(2))));
  }

  // Prints every newly completed epoch from shard 0's `status`.
  void ReportProgress(const absl::StatusOr<proto::ShardStatus>& status) {
    if (!status.ok()) return;
    for (const proto::EpochMetrics& e : status->epochs()) {
      // A restarted or resumed shard 0 serves the epochs its checkpoint
      // holds again; each is printed once.
      if (!e.complete() || epochs_.count(e.epoch()) > 0) continue;
      epochs_[e.epoch()] = e;
      const double elapsed =
          absl::ToDoubleSeconds(absl::Now() - workers_started_);
      const double eta =
          elapsed / e.epoch() * (config_.training.epochs - e.epoch());
      Say(absl::StrFormat(
          "epoch %d/%d  train loss %.4f  test accuracy %.4f%s  %.0f "
          "samples/s  elapsed %s  ETA %s",
          e.epoch(), config_.training.epochs, e.train_loss(), e.test_accuracy(),
          ScorePhrase(e), e.samples_per_second(), FormatDuration(elapsed),
          FormatDuration(eta)));
    }
  }

  bool WriteSummary(double wall) {
    std::vector<std::pair<std::string, int>> restarts_by_process;
    for (const Proc& p : procs_) {
      if (p.restarts > 0) restarts_by_process.emplace_back(p.name, p.restarts);
    }
    const std::string json = SummaryJson(config_, epochs_, wall, push_,
                                         restarts_, restarts_by_process);
    std::ofstream out(options_.summary_path, std::ios::trunc);
    out << json;
    if (!out.good()) {
      Say(absl::StrCat("--summary: cannot write ", options_.summary_path));
      return false;
    }
    return true;
  }

  int Fail(const std::string& why) {
    Say(absl::StrCat("FAILED: ", why, "; stopping every other process"));
    sup_.StopAll(kStopGrace);
    return 1;
  }

  int Interrupted(int signo) {
    Say(absl::StrCat("interrupted by ", strsignal(signo),
                     "; stopping every process"));
    sup_.StopAll(kStopGrace);
    return 130;
  }

  const RunOptions& options_;
  const JobConfig config_;
  const JobSecurity security_;  // For the status queries.
  // Every process of this start of the job registers under it, so that
  // servers never take workers of another start of the same job.
  const std::string launch_;
  const absl::Time started_;
  ServerWatch watch_;
  absl::Time workers_started_ = absl::InfinitePast();
  std::unique_ptr<RunFolder> folder_;
  std::string etcd_;  // The local coordinator's endpoint; empty: none.
  // Where the servers checkpoint: checkpoint.dir, or when the job names
  // none (run_checkpoints_) a folder in the run's, passed to each server;
  // empty: nowhere (checkpoint.enabled: false).
  std::string checkpoint_dir_;
  bool run_checkpoints_ = false;
  Supervisor sup_;
  std::vector<Proc> procs_;
  int restarts_ = 0;
  std::unique_ptr<ServerFleet> fleet_;
  int workers_done_ = 0;
  PushBytes push_;  // Per worker step, once the workers are done.
  std::map<int, proto::EpochMetrics> epochs_;  // By epoch number.
};

}  // namespace

int RunJob(const RunOptions& options) {
  absl::StatusOr<JobConfig> config = LoadJobConfig(options.job_path);
  if (!config.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(config.status().message()).c_str());
    return 1;
  }
  if (config->servers_from_slurm) {
    std::fprintf(stderr,
                 "paramctl: %s: cluster.servers is {slurm: N}: the job runs "
                 "under Slurm (paramctl slurm writes its batch script); "
                 "paramctl run needs a list of addresses\n",
                 options.job_path.c_str());
    return 1;
  }
  if (config->model.type == ModelType::kTensors &&
      config->worker.command.empty()) {
    std::fprintf(stderr,
                 "paramctl: %s: worker.command: a model.type tensors job is "
                 "trained by a framework's worker (e.g. [\"/usr/bin/python3\", "
                 "\"train.py\"] with paramd.torch); give its command\n",
                 options.job_path.c_str());
    return 1;
  }
  std::vector<std::string> binaries = {options.server_binary};
  if (config->worker.command.empty()) {
    binaries.push_back(options.worker_binary);
  }
  for (const std::string& binary : binaries) {
    if (access(binary.c_str(), X_OK) != 0) {
      std::fprintf(
          stderr,
          "paramctl: cannot execute %s (build it with bazel build //...)\n",
          binary.c_str());
      return 1;
    }
  }
  if (absl::Status s =
          CheckCheckpointDir(*config, options.resume, options.fresh);
      !s.ok()) {
    std::fprintf(stderr, "paramctl: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  if (options.make_secrets) {
    absl::StatusOr<std::vector<std::string>> said = MakeLocalSecrets(*config);
    if (!said.ok()) {
      std::fprintf(stderr, "paramctl: %s\n",
                   std::string(said.status().message()).c_str());
      return 1;
    }
    for (const std::string& line : *said) Say(line);
  }
  absl::StatusOr<JobSecurity> security = LoadSecurity(config->security);
  if (!security.ok()) {
    std::fprintf(stderr, "paramctl: %s\n",
                 std::string(security.status().message()).c_str());
    return 1;
  }
  InstallStopSignals();
  return JobRun(options, *std::move(config), *std::move(security)).Run();
}

}  // namespace paramd
