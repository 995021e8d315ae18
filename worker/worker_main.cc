// paramd-worker --job J.yaml --rank R: trains as worker R of the job.
//
// --servers HOST:PORT,... overrides the job's cluster.servers (paramctl
// passes the ports servers bound when the job asks for port 0), and
// --backups HOST:PORT,... the job's replication.backups; --launch ID
// is the start of the job it belongs to (see paramd-server). With
// metrics.port (or --metrics_listen HOST:PORT) it serves Prometheus metrics
// at /metrics (see paramd-server).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/coord/members.h"
#include "common/coord/rpc/member_registration.h"
#include "common/launch/daemon_start.h"
#include "spdlog/spdlog.h"
#include "worker/rpc/grpc_parameter_client.h"
#include "worker/trainer.h"
#include "worker/worker_metrics.h"

namespace paramd {
namespace {

constexpr char kUsage[] =
    "usage: paramd-worker --job J.yaml --rank R [--servers HOST:PORT,...] "
    "[--backups HOST:PORT,...] [--launch ID] [--metrics_listen HOST:PORT] "
    "[--metrics_port_file PATH] [--etcd ENDPOINT,...] "
    "[--log_level LEVEL]";

int Run(int argc, char** argv) {
  int exit_code = 0;
  std::optional<DaemonStart> start = StartDaemon(
      {"paramd-worker", kUsage, "rank", {"servers", "backups", "launch"}}, argc,
      argv, &exit_code);
  if (!start) return exit_code;
  const int rank = start->id;
  std::vector<std::string> servers;
  if (start->flags.Has("servers")) {
    servers =
        absl::StrSplit(start->flags.Get("servers", ""), ',', absl::SkipEmpty());
  }
  GrpcClientOptions client;
  client.launch = start->flags.Get("launch", "");
  if (start->flags.Has("backups")) {
    client.backups =
        absl::StrSplit(start->flags.Get("backups", ""), ',', absl::SkipEmpty());
  }
  if (start->config.servers_from_etcd && !start->flags.Has("servers")) {
    // A server restarted elsewhere registers there: calls follow it.
    client.find_servers =
        [config = start->config]() -> absl::StatusOr<std::vector<std::string>> {
      JobConfig now = config;
      if (absl::Status s = ResolveEtcdServers(&now, absl::ZeroDuration());
          !s.ok()) {
        return s;
      }
      return now.servers;
    };
  }
  const absl::Time started = absl::Now();
  WorkerMetrics metrics(start->config.job_id, rank);
  TrainerOptions options;
  options.on_step = [&metrics](uint64_t clock, double loss) {
    metrics.OnStep(clock, loss);
  };
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> endpoint =
      StartMetricsEndpoint(
          *start, start->config.num_shards() + rank,
          [&metrics, started] { return metrics.Families(started); });
  if (!endpoint.ok()) {
    std::fprintf(stderr, "paramd-worker: rank %d: metrics: %s\n", rank,
                 std::string(endpoint.status().message()).c_str());
    return 1;
  }
  if (*endpoint != nullptr) {
    spdlog::info("rank {}: metrics at http://{}:{}/metrics", rank,
                 start->config.metrics.bind, (*endpoint)->port());
  }
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(start->config, rank, std::move(options),
                      metrics.Wrap(GrpcParameterClientFactory(
                          std::move(servers), std::move(client))));
  if (!trainer.ok()) {
    std::fprintf(stderr, "paramd-worker: rank %d: %s\n", rank,
                 std::string(trainer.status().message()).c_str());
    return 1;
  }
  // A member of the job in its coordinator while it trains.
  std::unique_ptr<MemberRegistration> member;
  if (start->config.coordination.enabled()) {
    absl::StatusOr<std::unique_ptr<MemberRegistration>> registered =
        MemberRegistration::Start(start->config, ThisProcess("worker", rank));
    if (!registered.ok()) {
      std::fprintf(stderr, "paramd-worker: rank %d: %s\n", rank,
                   std::string(registered.status().message()).c_str());
      return 1;
    }
    member = std::move(*registered);
    spdlog::info("rank {}: registered as {}", rank, member->key());
  }
  if (absl::Status s = (*trainer)->Run(); !s.ok()) {
    spdlog::error("rank {}: {}", rank, s.ToString());
    return 1;
  }
  spdlog::info("rank {}: finished {} epochs", rank,
               start->config.training.epochs);
  return 0;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Run(argc, argv); }
