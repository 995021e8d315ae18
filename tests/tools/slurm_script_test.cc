// paramctl slurm's batch script (tools/deploy/slurm_script.h), as text; the
// real Slurm runs it in slurm_cluster_test.
#include "tools/deploy/slurm_script.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "tests/subprocess.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

JobConfig SlurmJob() {
  JobConfig config;
  config.job_id = "mlp";
  config.path = "/jobs/mlp.yaml";
  config.servers_from_slurm = true;
  config.servers.assign(3, "");
  config.num_workers = 4;
  return config;
}

// SlurmJob with replication.factor 2.
JobConfig ReplicatedJob() {
  JobConfig config = SlurmJob();
  config.replication.factor = 2;
  config.replication.backups.assign(3, "");
  return config;
}

SlurmScriptOptions Options() {
  SlurmScriptOptions o;
  o.job_path = "/jobs/mlp.yaml";
  o.server_binary = "/opt/paramd/paramd-server";
  o.worker_binary = "/opt/paramd/paramd-worker";
  o.log_dir = "/logs";
  return o;
}

// Checks that `script` holds each of `lines`.
void CheckHolds(const std::string& script,
                std::initializer_list<const char*> lines) {
  for (const char* line : lines) {
    INFO(line);
    CHECK(absl::StrContains(script, line));
  }
}

// Whether bash reads `script` without a syntax error (bash -n).
bool ValidBash(const std::string& script) {
  const std::string path =
      testing::WriteFile(testing::NewTempDir() + "/job.sbatch", script);
  testing::Subprocess bash({"/bin/bash", "-n", path});
  return bash.Wait(absl::Seconds(30)) == 0;
}

TEST_CASE("the script asks for the job's tasks and launches two steps",
          "[slurm]") {
  SlurmScriptOptions o = Options();
  o.partition = "gpu";
  o.time = "01:00:00";
  o.gpus_per_worker = 2;
  absl::StatusOr<std::string> script = SlurmBatchScript(SlurmJob(), o);
  REQUIRE(script.ok());
  CheckHolds(*script,
             {"#SBATCH --job-name=paramd-mlp\n", "#SBATCH --nodes=4\n",
              "#SBATCH --ntasks=7\n", "#SBATCH --partition=gpu\n",
              "#SBATCH --time=01:00:00\n", "#SBATCH --gpus=8\n",
              "#SBATCH --output=/logs/paramd-%j-batch.log\n", "SERVERS=3\n",
              "WORKERS=4\n", "--gpus-per-task=2", "--distribution=block",
              "--output=\"$LOGS/paramd-%j-server-%t.log\"",
              "--output=\"$LOGS/paramd-%j-worker-%t.log\"",
              "--shard \"$SLURM_PROCID\"", "--rank \"$SLURM_PROCID\"",
              "scancel --signal=TERM", "exit $rc\n"});
  CHECK(ValidBash(*script));
}

TEST_CASE(
    "with replicas a third step starts the backups where the rule "
    "puts them",
    "[slurm][replication]") {
  JobConfig config = ReplicatedJob();
  absl::StatusOr<std::string> script = SlurmBatchScript(config, Options());
  REQUIRE(script.ok());
  CheckHolds(*script, {"#SBATCH --ntasks=10\n", "three job steps",
                       "--job-name=paramd-backups", "--distribution=arbitrary",
                       "SLURM_HOSTFILE=\"$BACKUP_HOSTS\"",
                       "(( (k / PER + 1) % SERVER_NODES ))",
                       "--output=\"$LOGS/paramd-%j-backup-%t.log\"",
                       "--shard \"$SLURM_PROCID\" --backup",
                       "$2 == \"paramd-backups\"", "wait $backups_pid\n"});
  CHECK(ValidBash(*script));
  // Without replicas none of it.
  script = SlurmBatchScript(SlurmJob(), Options());
  REQUIRE(script.ok());
  CHECK_FALSE(absl::StrContains(*script, "paramd-backups\n"));
  CHECK_FALSE(absl::StrContains(*script, "backups_pid"));
}

TEST_CASE(
    "a replicated job without coordination.etcd gets an etcd step on its "
    "first node, and every process is given it",
    "[slurm][replication][coordination]") {
  JobConfig config = ReplicatedJob();
  SlurmScriptOptions o = Options();
  o.etcd_binary = "/usr/bin/etcd";
  REQUIRE(SlurmStartsEtcd(config, o));
  absl::StatusOr<std::string> script = SlurmBatchScript(config, o);
  REQUIRE(script.ok());
  CheckHolds(
      *script,
      {"#SBATCH --ntasks=11\n", "four job steps", "ETCD='/usr/bin/etcd'\n",
       "BASE=$(( 20000 + SLURM_JOB_ID % 2000 * 16 ))\n",
       "ETCD_PORT=$(( BASE + 2 * SERVERS ))\n", "ETCD_HOST=${HOSTS[0]}\n",
       "--job-name=paramd-etcd", "--nodelist=\"$ETCD_HOST\"",
       "--output=\"$LOGS/paramd-%j-etcd.log\"",
       "/dev/tcp/$ETCD_HOST/$ETCD_PORT",
       "\"$SERVER\" \"$JOB\" \"${ETCD_ARGS[@]}\" &\nservers_pid",
       "--backup \"${@:2}\"", "\"$WORKER\" \"$JOB\" \"${ETCD_ARGS[@]}\" &",
       "$2 == \"paramd-etcd\"", "wait $etcd_pid\n"});
  CHECK(ValidBash(*script));
  // The etcd stops after the servers (they end their leases first).
  CHECK(script->find("wait $etcd_pid\n") > script->find("wait $servers_pid"));
  // A fixed base port is written as it is.
  config.slurm_port = 31000;
  script = SlurmBatchScript(config, o);
  REQUIRE(script.ok());
  CHECK(absl::StrContains(*script, "BASE=31000\n"));
  // The job's own etcd named: nothing started.
  config.coordination.etcd = {"etcd-0:2379"};
  CHECK_FALSE(SlurmStartsEtcd(config, o));
  script = SlurmBatchScript(config, o);
  REQUIRE(script.ok());
  CHECK_FALSE(absl::StrContains(*script, "paramd-etcd"));
  CHECK_FALSE(absl::StrContains(*script, "without a fence"));
  // No etcd found: the script says so and runs the replicas unfenced.
  config.coordination.etcd.clear();
  o.etcd_binary.clear();
  script = SlurmBatchScript(config, o);
  REQUIRE(script.ok());
  CHECK(absl::StrContains(*script, "replicas without a fence"));
  CHECK_FALSE(absl::StrContains(*script, "paramd-etcd"));
  CHECK(absl::StrContains(*script, "#SBATCH --ntasks=10\n"));
  CHECK(ValidBash(*script));
  // An unreplicated job has no fence to keep.
  CHECK_FALSE(SlurmStartsEtcd(SlurmJob(), Options()));
}

TEST_CASE("worker.command runs a framework's worker in the job's folder",
          "[slurm]") {
  JobConfig config = SlurmJob();
  config.worker.command = {"/usr/bin/python3", "train.py", "it's"};
  SlurmScriptOptions o = Options();
  o.python_path = "/opt/paramd/python";
  absl::StatusOr<std::string> script = SlurmBatchScript(config, o);
  REQUIRE(script.ok());
  CHECK(absl::StrContains(
      *script,
      "  env PARAMD_JOB=\"$JOB\" PYTHONPATH='/opt/paramd/python'"
      "${PYTHONPATH:+:$PYTHONPATH} bash -c 'cd \"$(dirname "
      "\"$PARAMD_JOB\")\" && exec \"$@\"' worker '/usr/bin/python3' "
      "'train.py' 'it'\\''s' &\n"));
  CHECK_FALSE(absl::StrContains(*script, "--rank \"$SLURM_PROCID\""));
  CHECK(ValidBash(*script));
}

TEST_CASE("without options the script leaves Slurm's defaults alone",
          "[slurm]") {
  SlurmScriptOptions o = Options();
  o.nodes = 1;
  absl::StatusOr<std::string> script = SlurmBatchScript(SlurmJob(), o);
  REQUIRE(script.ok());
  CHECK(absl::StrContains(*script, "#SBATCH --nodes=1\n"));
  CHECK_FALSE(absl::StrContains(*script, "--partition"));
  CHECK_FALSE(absl::StrContains(*script, "--time"));
  CHECK_FALSE(absl::StrContains(*script, "gpus"));
}

TEST_CASE("a job with listed servers and values sbatch misreads are refused",
          "[slurm]") {
  JobConfig listed = SlurmJob();
  listed.servers_from_slurm = false;
  absl::StatusOr<std::string> script = SlurmBatchScript(listed, Options());
  REQUIRE_FALSE(script.ok());
  CHECK(absl::StrContains(script.status().message(), "{slurm: N}"));
  SlurmScriptOptions o = Options();
  o.partition = "a b";
  script = SlurmBatchScript(SlurmJob(), o);
  REQUIRE_FALSE(script.ok());
  CHECK(absl::StrContains(script.status().message(), "--partition"));
  o = Options();
  o.gpus_per_worker = -1;
  CHECK_FALSE(SlurmBatchScript(SlurmJob(), o).ok());
  o = Options();
  o.log_dir = "/my logs";
  CHECK_FALSE(SlurmBatchScript(SlurmJob(), o).ok());
}

}  // namespace
}  // namespace paramd
