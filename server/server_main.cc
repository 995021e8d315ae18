// paramd-server --job J.yaml --shard K: serves shard K of the job.
//
// Listens on the job's address for shard K unless --listen overrides it;
// with --port_file PATH it writes the bound port there (atomically) once it
// accepts connections, which is how paramctl learns ports chosen by port 0.
// SIGINT or SIGTERM shuts it down cleanly.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/job_config.h"
#include "common/job_file.h"
#include "common/logging.h"
#include "common/process_setup.h"
#include "server/parameter_server.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {

constexpr char kUsage[] =
    "usage: paramd-server --job J.yaml --shard K [--listen HOST:PORT] "
    "[--port_file PATH] [--log_level LEVEL]";

absl::Status WritePortFile(const std::string& path, int port) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.good()) {
      return absl::UnavailableError(
          absl::StrCat("--port_file: cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("--port_file: cannot rename to ", path));
  }
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  SetUpProcess();
  absl::StatusOr<ParsedFlags> flags = ParseFlags(
      argc, argv, {"job", "shard", "listen", "port_file", "log_level"}, {});
  if (!flags.ok()) {
    std::fprintf(stderr, "paramd-server: %s\n%s\n",
                 std::string(flags.status().message()).c_str(), kUsage);
    return 2;
  }
  if (!flags->Has("job") || !flags->Has("shard")) {
    std::fprintf(stderr, "paramd-server: --job and --shard are required\n%s\n",
                 kUsage);
    return 2;
  }
  absl::StatusOr<int> shard_id = flags->GetInt("shard", -1);
  absl::Status log_status =
      InitLogging("paramd-server", flags->Get("log_level", "info"));
  if (!shard_id.ok() || !log_status.ok()) {
    std::fprintf(
        stderr, "paramd-server: %s\n",
        std::string((shard_id.ok() ? log_status : shard_id.status()).message())
            .c_str());
    return 2;
  }
  absl::StatusOr<JobConfig> config = LoadJobConfig(flags->Get("job", ""));
  if (!config.ok()) {
    std::fprintf(stderr, "paramd-server: %s\n",
                 std::string(config.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<ParameterServer>> server =
      ParameterServer::Create(*config, *shard_id);
  if (!server.ok()) {
    std::fprintf(stderr, "paramd-server: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }

  // Signals are taken by sigwait below; block them before gRPC starts its
  // threads so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string address = flags->Get("listen", config->servers[*shard_id]);
  absl::StatusOr<int> port = (*server)->Start(address);
  if (!port.ok()) {
    spdlog::error("shard {}: {}", *shard_id,
                  std::string(port.status().message()));
    return 1;
  }
  const Shard& shard = *(*server)->shard();
  spdlog::info(
      "shard {}/{} of job '{}' listening on port {}: {} chunks, {} "
      "bytes, policy {}",
      *shard_id, config->num_shards(), config->job_id, *port,
      shard.plan().ChunksOfShard(*shard_id).size(),
      shard.plan().BytesOnShard(*shard_id), PolicyName(config->policy.type));
  if (flags->Has("port_file")) {
    if (absl::Status s = WritePortFile(flags->Get("port_file", ""), *port);
        !s.ok()) {
      spdlog::error("{}", std::string(s.message()));
      (*server)->Shutdown();
      return 1;
    }
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("shard {}: signal {} received, shutting down", *shard_id,
               signal_number);
  (*server)->Shutdown();
  (*server)->Wait();
  return 0;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Run(argc, argv); }
