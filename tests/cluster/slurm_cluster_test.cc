// paramd under a real Slurm: scripts/local-slurm.sh brings up munged,
// slurmctld and slurmd (Debian's slurm-wlm and munge) on 127.0.0.1 as
// root; `paramctl slurm` writes the batch script; sbatch runs the job's
// servers and workers as two job steps. One job trains to the end (exit
// status 0, accuracy well above chance); another is stopped with scancel
// and its servers write checkpoints on the way out. The daemons are torn
// down by their pids at the end. A replicated job runs its backups as a
// third step, and survives a primary SIGKILLed mid-job. Skips, saying
// why, when not root or when Slurm is not installed.
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/skip_main.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd {
namespace testing {

std::string SkipReason() {
  if (getuid() != 0) {
    return "needs root to start munged and Slurm's daemons";
  }
  return MissingPrograms({"munged", "slurmctld", "slurmd", "sbatch", "squeue",
                          "scancel", "scontrol", "srun"});
}

namespace {

constexpr absl::Duration kTimeout = absl::Minutes(3);

// Waits (inotify on the folder, no polling) until `path` contains
// `marker`; false after `timeout`.
bool AwaitFileContaining(const std::string& path, const std::string& marker,
                         absl::Duration timeout) {
  const int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  REQUIRE(fd >= 0);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  REQUIRE(inotify_add_watch(fd, dir.c_str(),
                            IN_MODIFY | IN_CREATE | IN_CLOSE_WRITE) >= 0);
  const absl::Time deadline = absl::Now() + timeout;
  bool found = false;
  while (!(found = absl::StrContains(ReadFileOrEmpty(path), marker))) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) >
        0) {
      char events[4096];
      while (read(fd, events, sizeof(events)) > 0) {
      }
    }
  }
  close(fd);
  return found;
}

// The single-node cluster, up for the whole test binary.
class LocalSlurm {
 public:
  static LocalSlurm& Get() {
    static LocalSlurm* cluster = new LocalSlurm();
    return *cluster;
  }
  const std::string& dir() const { return dir_; }
  bool up() const { return up_; }
  const std::string& output() const { return output_; }

  // Runs a Slurm client command with this cluster's config; exit code and
  // output.
  std::pair<int, std::string> Run(const std::vector<std::string>& args,
                                  absl::Duration timeout = kTimeout) {
    std::vector<std::string> argv = {"/usr/bin/env",
                                     "SLURM_CONF=" + dir_ + "/slurm.conf"};
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess p(argv);
    const int rc = p.Wait(timeout);
    return {rc, p.output()};
  }

  ~LocalSlurm() = delete;

 private:
  LocalSlurm() : dir_(NewTempDir() + "/slurm") {
    const absl::Time start = absl::Now();
    Subprocess up({"scripts/local-slurm.sh", "up", dir_});
    up_ = up.Wait(absl::Minutes(1)) == 0;
    output_ = up.output();
    bring_up_ = absl::Now() - start;
    std::printf("local Slurm up in %.2f s (%s)\n",
                absl::ToDoubleSeconds(bring_up_), up_ ? "ok" : "failed");
    std::atexit([] {
      Subprocess down({"scripts/local-slurm.sh", "down", Get().dir()});
      down.Wait(absl::Minutes(1));
    });
  }

  std::string dir_;
  bool up_ = false;
  std::string output_;
  absl::Duration bring_up_;
};

// A small job whose servers come from Slurm (with `replicated`, each with
// a backup), written with its batch script into a fresh folder; returns the
// folder.
std::string WriteJob(int epochs, int slow_step_ms, bool replicated = false) {
  const std::string dir = NewTempDir();
  JobOptions o;
  o.epochs = epochs;
  if (replicated) o.lease_seconds = 4;  // A take-over 4 s after a death.
  o.train_limit = 4096;
  o.test_limit = 1000;
  std::string yaml = JobYaml(o);
  const std::string list = R"(servers: ["127.0.0.1:0", "127.0.0.1:0"])";
  REQUIRE(absl::StrContains(yaml, list));
  yaml.replace(yaml.find(list), list.size(), "servers: {slurm: 2}");
  yaml += "checkpoint:\n  dir: checkpoints\n  every_steps: 1000\n";
  if (replicated) yaml += "replication:\n  factor: 2\n";
  if (slow_step_ms > 0) {
    yaml += absl::StrCat(
        "testing:\n  slow_rank: 0\n  slow_step_ms: ", slow_step_ms, "\n");
  }
  WriteFile(dir + "/job.yaml", yaml);
  std::filesystem::create_directories(dir + "/logs");
  Subprocess paramctl({"tools/paramctl", "slurm", dir + "/job.yaml", "--nodes",
                       "1", "--time", "10", "--logs", dir + "/logs", "--output",
                       dir + "/job.sbatch", "--server_binary",
                       "server/paramd-server", "--worker_binary",
                       "worker/paramd-worker"});
  REQUIRE(paramctl.Wait(kTimeout) == 0);
  return dir;
}

// sbatch --wait on the job's script: it prints the job id at once, then
// exits with the job's exit status when the job ends.
struct Submitted {
  std::unique_ptr<Subprocess> sbatch;
  std::string id;
};

Submitted Submit(const std::string& dir) {
  Submitted job;
  job.sbatch = std::make_unique<Subprocess>(std::vector<std::string>{
      "/usr/bin/env", "SLURM_CONF=" + LocalSlurm::Get().dir() + "/slurm.conf",
      "sbatch", "--parsable", "--wait", "--chdir=" + dir, dir + "/job.sbatch"});
  REQUIRE(job.sbatch->ReadUntil("\n", kTimeout));
  std::smatch id;
  const std::string out = job.sbatch->output();
  INFO(out);
  REQUIRE(std::regex_search(out, id, std::regex(R"(^(\d+))")));
  job.id = id[1].str();
  return job;
}

// A field of `scontrol show job ID`; empty when scontrol could not say
// (it is asked again a few times: a busy slurmctld may drop a request).
std::string JobField(const std::string& id, const std::string& field) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto [rc, out] = LocalSlurm::Get().Run({"scontrol", "show", "job", id});
    std::smatch m;
    if (rc == 0 && std::regex_search(out, m, std::regex(field + R"(=(\S+))"))) {
      return m[1].str();
    }
    std::printf("scontrol show job %s: exit %d: %s\n", id.c_str(), rc,
                out.c_str());
  }
  return "";
}

// The job's state once Slurm is done with it: sbatch --wait may return
// while the job is still COMPLETING (its processes being reaped), so this
// asks again (each scontrol call is a process of its own) until it is not,
// for up to kTimeout.
std::string SettledJobState(const std::string& id) {
  const absl::Time deadline = absl::Now() + kTimeout;
  std::string state = JobField(id, "JobState");
  while (state == "COMPLETING" && absl::Now() < deadline) {
    state = JobField(id, "JobState");
  }
  return state;
}

// squeue's steps of job `id` once none of paramd's is left: squeue may
// still list a cancelled job's step a moment after sbatch --wait returned,
// so this asks again (each squeue a process of its own) for up to kTimeout.
std::string SettledSteps(LocalSlurm& slurm, const std::string& id) {
  const absl::Time deadline = absl::Now() + kTimeout;
  std::string steps = slurm.Run({"squeue", "-h", "-s", "-j", id}).second;
  while (steps.find("paramd-") != std::string::npos && absl::Now() < deadline) {
    steps = slurm.Run({"squeue", "-h", "-s", "-j", id}).second;
  }
  return steps;
}

// The test accuracy a worker's log gives for its last epoch (of `epochs`).
double LastAccuracy(const std::string& log, int epochs) {
  INFO(log);
  std::smatch m;
  REQUIRE(std::regex_search(
      log, m,
      std::regex(
          absl::StrCat("epoch ", epochs, "/", epochs,
                       R"(: train loss [0-9.]+, test accuracy ([0-9.]+))"))));
  return std::stod(m[1].str());
}

TEST_CASE("sbatch runs a job's servers and workers to the end and it learns",
          "[slurm][cluster]") {
  LocalSlurm& slurm = LocalSlurm::Get();
  INFO(slurm.output());
  REQUIRE(slurm.up());
  const std::string dir = WriteJob(/*epochs=*/2, /*slow_step_ms=*/0);
  const absl::Time start = absl::Now();
  Submitted job = Submit(dir);
  const std::string& id = job.id;
  CHECK(job.sbatch->Wait(kTimeout) == 0);
  std::printf("job %s: sbatch --wait returned after %.1f s\n", id.c_str(),
              absl::ToDoubleSeconds(absl::Now() - start));
  CHECK(SettledJobState(id) == "COMPLETED");
  CHECK(JobField(id, "ExitCode") == "0:0");
  // One log per process, named by Slurm's job id and task id.
  const std::string logs = dir + "/logs/paramd-" + id;
  for (int r = 0; r < 2; ++r) {
    const std::string log =
        ReadFileOrEmpty(absl::StrCat(logs, "-worker-", r, ".log"));
    INFO(log);
    const double accuracy = LastAccuracy(log, 2);
    std::printf("job %s: rank %d test accuracy %.4f\n", id.c_str(), r,
                accuracy);
    CHECK(accuracy > 0.6);  // Chance is 0.1.
    CHECK(absl::StrContains(log, "finished 2 epochs"));
  }
  for (int k = 0; k < 2; ++k) {
    const std::string log =
        ReadFileOrEmpty(absl::StrCat(logs, "-server-", k, ".log"));
    INFO(log);
    CHECK(absl::StrContains(log, absl::StrCat("shard ", k, "/2")));
    // Stopped by the script with SIGTERM once the workers were done.
    CHECK(absl::StrContains(log, "signal 15 received"));
    CHECK(absl::StrContains(log, "checkpoint of version"));
  }
}

// The pid of task `task` of the job step named `step` (scontrol listpids:
// PID JOBID STEPID LOCALID GLOBALID); -1 when Slurm does not say.
pid_t TaskPid(const std::string& id, const std::string& step, int task) {
  auto [rc, steps] =
      LocalSlurm::Get().Run({"squeue", "-h", "-s", "-j", id, "-o", "%i %j"});
  std::smatch m;
  if (rc != 0 ||
      !std::regex_search(steps, m, std::regex(R"((\S+) )" + step + "\n"))) {
    return -1;
  }
  auto [lrc, pids] = LocalSlurm::Get().Run({"scontrol", "listpids", m[1]});
  const std::regex line(
      absl::StrCat(R"((\d+)\s+\d+\s+\d+\s+\d+\s+)", task, R"(\s*\n)"));
  return lrc == 0 && std::regex_search(pids, m, line) ? std::stoi(m[1]) : -1;
}

TEST_CASE(
    "sbatch runs a replicated job: each backup where the rule puts it; a "
    "primary SIGKILLed mid-job is taken over and the job learns",
    "[slurm][cluster][replication]") {
  LocalSlurm& slurm = LocalSlurm::Get();
  REQUIRE(slurm.up());
  const std::string dir =
      WriteJob(/*epochs=*/3, /*slow_step_ms=*/25, /*replicated=*/true);
  const std::string script = ReadFileOrEmpty(dir + "/job.sbatch");
  CHECK(absl::StrContains(script, "--job-name=paramd-backups"));
  // With etcd installed (Debian's etcd-server) the script runs one for the
  // job, which fences the replicas; without, they run unfenced.
  const bool fenced = MissingPrograms({"etcd"}).empty();
  if (!fenced) {
    std::printf("no etcd installed: the replicas run without a fence\n");
  }
  CHECK(absl::StrContains(script, "--job-name=paramd-etcd") == fenced);
  Submitted job = Submit(dir);
  const std::string& id = job.id;
  const std::string logs = dir + "/logs/paramd-" + id;
  REQUIRE(AwaitFileContaining(logs + "-worker-0.log", "epoch 1/3", kTimeout));
  const pid_t primary0 = TaskPid(id, "paramd-servers", 0);
  INFO(slurm.Run({"squeue", "-h", "-s", "-j", id}).second);
  REQUIRE(primary0 > 0);
  REQUIRE(kill(primary0, SIGKILL) == 0);
  CHECK(job.sbatch->Wait(kTimeout) == 0);
  CHECK(SettledJobState(id) == "COMPLETED");
  for (int r = 0; r < 2; ++r) {
    CHECK(LastAccuracy(
              ReadFileOrEmpty(absl::StrCat(logs, "-worker-", r, ".log")), 3) >
          0.6);
  }
  for (int k = 0; k < 2; ++k) {
    const std::string primary =
        ReadFileOrEmpty(absl::StrCat(logs, "-server-", k, ".log"));
    const std::string backup =
        ReadFileOrEmpty(absl::StrCat(logs, "-backup-", k, ".log"));
    INFO(primary << "\n--- backup:\n" << backup);
    // The backup listens where the rule puts it (one node: port base + 2 +
    // K), and its primary reached it there.
    std::smatch port, primary_port;
    REQUIRE(std::regex_search(backup, port,
                              std::regex(R"(listening on port (\d+))")));
    REQUIRE(std::regex_search(primary, primary_port,
                              std::regex(R"(listening on port (\d+))")));
    CHECK(std::stoi(port[1]) == std::stoi(primary_port[1]) + 2);
    CHECK(std::regex_search(
        primary, std::regex(absl::StrCat(R"(the backup at \S+:)", port[1].str(),
                                         R"( holds version \d+: in sync)"))));
    if (k == 0) {
      // Killed: its backup served the rest of the job and checkpointed.
      std::smatch took;
      CHECK(std::regex_search(
          backup, took, std::regex(R"(took over from the primary[^\n]*)")));
      std::printf("job %s: shard 0's backup %s\n", id.c_str(),
                  took.str().c_str());
      CHECK(absl::StrContains(backup, "checkpoint of version"));
    } else {
      // No step acknowledged without the backup (a keep-alive, version 0,
      // may miss the backup stopped first at the end); only the serving
      // replica checkpoints.
      CHECK_FALSE(
          std::regex_search(primary, std::regex("did not take version [1-9]")));
      CHECK(absl::StrContains(primary, "checkpoint of version"));
      CHECK_FALSE(absl::StrContains(backup, "checkpoint of version"));
    }
    CHECK(absl::StrContains(backup, "signal 15 received"));
    if (fenced) {
      // The primary told etcd its backup holds every step (the one thing
      // that lets the backup claim the shard), and shard 0's backup took
      // over at the term its claim gave it.
      CHECK(std::regex_search(
          primary, std::regex(R"(coordination\.etcd \[\S+:\d+\] says the )"
                              R"(backup at \S+ is in sync)")));
    }
  }
  if (fenced) {
    const std::string batch = ReadFileOrEmpty(logs + "-batch.log");
    INFO(batch << "\n--- etcd:\n" << ReadFileOrEmpty(logs + "-etcd.log"));
    CHECK(std::regex_search(
        batch, std::regex(R"(paramd: etcd at \S+:\d+ fences the replicas)")));
    // Stopped after the servers, and its data removed.
    CHECK(SettledSteps(slurm, id).find("paramd-etcd") == std::string::npos);
  }
}

TEST_CASE("scancel stops every process; servers checkpoint on SIGTERM",
          "[slurm][cluster]") {
  LocalSlurm& slurm = LocalSlurm::Get();
  REQUIRE(slurm.up());
  // ~100 s of training at 100 ms a step: it is cancelled long before.
  const std::string dir = WriteJob(/*epochs=*/8, /*slow_step_ms=*/100);
  Submitted job = Submit(dir);
  const std::string& id = job.id;
  const std::string logs = dir + "/logs/paramd-" + id;
  // Running for real: a worker has started its steps.
  REQUIRE(AwaitFileContaining(logs + "-worker-0.log", "training samples",
                              kTimeout));
  auto [rc, out] = slurm.Run({"scancel", id});
  INFO(out);
  CHECK(rc == 0);
  // sbatch --wait returns once the job has ended. Its status is Slurm's
  // and racy (seen 0 for a job CANCELLED with ExitCode 143): the job's
  // settled state below says how it ended.
  const int sbatch_code = job.sbatch->Wait(kTimeout);
  INFO("sbatch --wait: " << sbatch_code);
  // Each server's last lines: the job may count as ended in Slurm before
  // its steps' processes have written them (seen once, with both cores
  // busy), so they are waited for, bounded.
  for (int k = 0; k < 2; ++k) {
    const std::string log = absl::StrCat(logs, "-server-", k, ".log");
    // Slurm kills a step 10 s (KillWait) after its SIGTERM.
    constexpr absl::Duration kLastLines = absl::Seconds(30);
    const bool stopped =
        AwaitFileContaining(log, "signal 15 received", kLastLines) &&
        AwaitFileContaining(log, "checkpoint of version", kLastLines);
    INFO(ReadFileOrEmpty(log));
    CHECK(stopped);
  }
  CHECK(std::filesystem::exists(dir + "/checkpoints"));
  int checkpoints = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(dir + "/checkpoints")) {
    checkpoints += absl::EndsWith(e.path().string(), ".ckpt");
  }
  CHECK(checkpoints >= 2);
  // The job is over, cancelled, and nothing of it runs: no step left.
  const std::string steps = SettledSteps(slurm, id);
  const std::string state = SettledJobState(id);
  INFO("JobState=" << state << "\n"
                   << slurm.Run({"scontrol", "show", "job", id}).second);
  CHECK(absl::StrContains(state, "CANCELLED"));
  CHECK(steps.find("paramd-") == std::string::npos);
}

}  // namespace
}  // namespace testing
}  // namespace paramd
