// paramd-server --job J.yaml --shard K: serves shard K of the job.
//
// Listens on the job's address for shard K unless --listen overrides it;
// with --port_file PATH it writes the bound port there (atomically) once it
// accepts connections, which is how paramctl learns ports chosen by port 0.
// --launch ID names the start of the job it serves (paramctl run passes a
// random one to every process): workers of another launch are refused.
// With checkpoint.dir it starts from its newest checkpoint there (--fresh:
// discards them instead; --checkpoint_dir DIR puts them in DIR instead of
// checkpoint.dir). SIGINT or SIGTERM writes a checkpoint (with
// checkpoint.dir) and shuts it down cleanly. With metrics.port (or
// --metrics_listen HOST:PORT) it serves Prometheus metrics at /metrics and
// "ok" at /healthz; --metrics_port_file PATH receives that port.
// For a job whose servers come from Slurm (cluster.servers: {slurm: N}) it
// listens on every interface at its port from the placement rule
// (common/launch/slurm.h), and refuses to start on another node than the
// rule's.
// With replication.factor 2, --backup starts it as shard K's backup
// (listening at replication.backups[K] unless --listen says otherwise);
// --peer HOST:PORT is the other replica (default: the job file's). A
// primary that learns its backup took over exits with status 3; started
// again, it rejoins as the backup. --ack_log PATH appends every step it
// acknowledges as primary, with its term (server/replication/ack_journal.h).
// A framework job whose file leaves the model to its workers (no tensor
// list, or no optimizer section) listens first for their declaration
// (server/declare/rpc/declaration_server.h), then serves the shard on the same
// port; with checkpoint.dir a restart serves the declaration it kept.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/base/status_macros.h"
#include "common/config/job_config.h"
#include "common/coord/members.h"
#include "common/coord/rpc/member_registration.h"
#include "common/launch/daemon_start.h"
#include "common/launch/slurm.h"
#include "server/declare/model_declaration.h"
#include "server/declare/rpc/declaration_server.h"
#include "server/rpc/parameter_server.h"
#include "server/shard/shard_metrics.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {

constexpr char kUsage[] =
    "usage: paramd-server --job J.yaml --shard K [--listen HOST:PORT] "
    "[--port_file PATH] [--launch ID] [--fresh] [--checkpoint_dir DIR] "
    "[--backup] [--peer HOST:PORT] [--ack_log PATH] "
    "[--metrics_listen HOST:PORT] "
    "[--metrics_port_file PATH] [--etcd ENDPOINT,...] [--log_level LEVEL]";

// What ends a wait: SIGINT or SIGTERM; this process giving its shard up to
// its backup (replication); or, while it waits for its model, a worker's
// declaration. The signals are blocked in every thread (BlockSignals) and
// read from a signalfd; the replica's and the declaration server's
// callbacks write an eventfd (Notify); Wait sleeps in poll on both.
class StopEvents {
 public:
  // SIGINT and SIGTERM.
  static sigset_t Signals() {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    return signals;
  }
  // First thing in main, before any thread starts (the shard's, gRPC's),
  // so that every thread inherits the mask: a signal left unblocked in one
  // thread would be delivered there and end the process unannounced.
  static void BlockSignals() {
    const sigset_t signals = Signals();
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  }

  StopEvents() {
    const sigset_t signals = Signals();
    signal_fd_ = signalfd(-1, &signals, SFD_CLOEXEC);
    replaced_fd_ = eventfd(0, EFD_CLOEXEC);
  }
  ~StopEvents() {
    if (signal_fd_ >= 0) close(signal_fd_);
    if (replaced_fd_ >= 0) close(replaced_fd_);
  }
  StopEvents(const StopEvents&) = delete;
  StopEvents& operator=(const StopEvents&) = delete;

  bool ok() const { return signal_fd_ >= 0 && replaced_fd_ >= 0; }
  // From any thread, under any lock: it only writes the eventfd.
  void Notify() {
    const uint64_t one = 1;
    (void)!write(replaced_fd_, &one, sizeof(one));
  }
  // Blocks until one comes: the signal's number, or 0 for Notify.
  int Wait() {
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {replaced_fd_, POLLIN, 0}};
    while (true) {
      if (poll(fds, 2, -1) < 0) continue;  // EINTR
      if (fds[1].revents & POLLIN) return 0;
      signalfd_siginfo info;
      if ((fds[0].revents & POLLIN) &&
          read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
        return static_cast<int>(info.ssi_signo);
      }
    }
  }

 private:
  int signal_fd_ = -1;
  int replaced_fd_ = -1;
};

// The address to listen on: --listen, else the shard's address in the job;
// for servers from Slurm, every interface at the rule's port, on the rule's
// node only.
absl::StatusOr<std::string> ListenAddress(const DaemonStart& start) {
  const JobConfig& config = start.config;
  if (start.flags.Has("listen")) return start.flags.Get("listen", "");
  const bool backup = start.flags.Has("backup");
  const std::string& own =
      backup ? config.replication.backups[start.id] : config.servers[start.id];
  if (!config.servers_from_slurm) return own;
  std::string host;
  int port = 0;
  RETURN_IF_ERROR(ParseHostPort(own, &host, &port));
  const char* node = std::getenv("SLURMD_NODENAME");
  if (node != nullptr && host != node) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Slurm started shard ", start.id, backup ? "'s backup" : "",
        " on node ", node, " but the placement rule puts it on ", host,
        ": start the servers as the script of `paramctl slurm` does (",
        backup ? "srun --distribution=arbitrary with its host file"
               : "srun --ntasks-per-node=P --distribution=block",
        ")"));
  }
  return absl::StrCat("0.0.0.0:", port);
}

// "host:port" of `address` with `port`; the port of an address (0 when
// it has none).
std::string WithPort(const std::string& address, int port) {
  std::string host;
  int ignored = 0;
  (void)ParseHostPort(address, &host, &ignored);
  return absl::StrCat(host, ":", port);
}
int PortOf(const std::string& address) {
  std::string host;
  int port = 0;
  return ParseHostPort(address, &host, &port).ok() ? port : 0;
}

// This process as a member of the job (coordination.etcd): shard K's
// server or backup, where workers reach it — the address it listens at
// (--listen) or its address in the job, with the bound `port`; a wildcard
// host (every interface) is registered as this host's name.
JobMember ServerMember(const DaemonStart& start, const std::string& listen,
                       int port) {
  const bool backup = start.flags.Has("backup");
  const JobConfig& config = start.config;
  JobMember m = ThisProcess(backup ? "backup" : "server", start.id);
  const std::string& address =
      start.flags.Has("listen") ? listen
                                : (backup ? config.replication.backups[start.id]
                                          : config.servers[start.id]);
  std::string listen_host;
  int ignored = 0;
  (void)ParseHostPort(address, &listen_host, &ignored);
  const bool wildcard = listen_host.empty() || listen_host == "0.0.0.0" ||
                        listen_host == "::" || listen_host == "[::]";
  m.address = wildcard && !m.host.empty() ? absl::StrCat(m.host, ":", port)
                                          : WithPort(address, port);
  return m;
}

// replication.factor 2: this process's part in the shard's replicas,
// reached at its own address with the bound `port`; `events` learns when
// it gives the shard up. False (logged) when it cannot start.
bool StartReplication(const DaemonStart& start, int port,
                      ParameterServer& server, StopEvents& events) {
  const JobConfig& config = start.config;
  const int shard_id = start.id;
  const bool backup = start.flags.Has("backup");
  const std::string& own =
      backup ? config.replication.backups[shard_id] : config.servers[shard_id];
  std::string peer =
      backup ? config.servers[shard_id] : config.replication.backups[shard_id];
  if (start.flags.Has("peer")) peer = start.flags.Get("peer", "");
  if (start.flags.Has("ack_log")) {
    absl::StatusOr<std::unique_ptr<AckJournal>> journal =
        AckJournal::Open(start.flags.Get("ack_log", ""), shard_id);
    if (!journal.ok()) {
      spdlog::error("shard {}: {}", shard_id,
                    std::string(journal.status().message()));
      return false;
    }
    server.shard()->replica()->set_ack_journal(std::move(*journal));
  }
  // A replaced primary serves nothing: it stops (status 3).
  if (absl::Status s = server.StartReplica(WithPort(own, port),
                                           PortOf(peer) == 0 ? "" : peer,
                                           [&events] { events.Notify(); });
      !s.ok()) {
    spdlog::error("shard {}: {}", shard_id, std::string(s.message()));
    return false;
  }
  return true;
}

// Ends serving after `signal_number` (0: the shard was given up to its
// backup): a last checkpoint (with checkpoint.dir), then the server's
// shutdown. Returns the exit status.
int Stop(const DaemonStart& start, int signal_number, ParameterServer& server,
         MetricsEndpoint* metrics) {
  const int shard_id = start.id;
  const bool replaced = signal_number == 0;
  // A replaced process holds nothing that must be saved: its shutdown is
  // bounded, so that it never lingers half-stopped.
  absl::Notification shut_down;
  std::thread shutdown_deadline;
  if (replaced) {
    spdlog::error(
        "shard {}: replaced by its backup (or out of touch with it for "
        "a lease); exiting (start it again to rejoin as the backup)",
        shard_id);
    shutdown_deadline = std::thread([&shut_down, shard_id] {
      constexpr absl::Duration kLimit = absl::Seconds(10);
      if (!shut_down.WaitForNotificationWithTimeout(kLimit)) {
        spdlog::error("shard {}: shutdown did not end within {}; exiting now",
                      shard_id, absl::FormatDuration(kLimit));
        spdlog::default_logger()->flush();
        std::_Exit(3);
      }
    });
  } else {
    spdlog::info("shard {}: signal {} received, shutting down", shard_id,
                 signal_number);
  }
  if (!start.config.checkpoint.dir.empty()) {
    absl::StatusOr<proto::CheckpointResponse> written =
        server.shard()->CheckpointNow();
    if (written.ok()) {
      spdlog::info("shard {}: checkpoint of version {} written to {}", shard_id,
                   written->version(), written->path());
    }
  }
  if (metrics != nullptr) metrics->Stop();
  server.Shutdown();
  server.Wait();
  shut_down.Notify();
  if (shutdown_deadline.joinable()) shutdown_deadline.join();
  return replaced ? 3 : 0;
}

// Serves until SIGINT or SIGTERM, or until the shard is given up; returns
// the exit status.
int Serve(const DaemonStart& start, ParameterServer& server) {
  const JobConfig& config = start.config;
  const int shard_id = start.id;
  StopEvents events;
  if (!events.ok()) {
    spdlog::error("shard {}: signalfd/eventfd: {}", shard_id,
                  std::strerror(errno));
    return 1;
  }
  absl::StatusOr<std::string> listen = ListenAddress(start);
  absl::StatusOr<int> port =
      listen.ok() ? server.Start(*listen) : listen.status();
  if (!port.ok()) {
    spdlog::error("shard {}: {}", shard_id,
                  std::string(port.status().message()));
    return 1;
  }
  const Shard& shard = *server.shard();
  spdlog::info(
      "shard {}/{} of job '{}' listening on port {}: {} chunks, {} bytes, "
      "policy {}",
      shard_id, config.num_shards(), config.job_id, *port,
      shard.plan().ChunksOfShard(shard_id).size(),
      shard.plan().BytesOnShard(shard_id), PolicyName(config.policy.type));
  if (start.flags.Has("port_file")) {
    if (absl::Status s =
            WritePortFile("port_file", start.flags.Get("port_file", ""), *port);
        !s.ok()) {
      spdlog::error("{}", std::string(s.message()));
      server.Shutdown();
      return 1;
    }
  }
  if (config.replication.enabled() &&
      !StartReplication(start, *port, server, events)) {
    server.Shutdown();
    return 1;
  }
  const absl::Time started = absl::Now();
  absl::StatusOr<std::unique_ptr<MetricsEndpoint>> metrics =
      StartMetricsEndpoint(start, shard_id, [&server, started] {
        return ShardMetrics(*server.shard(), started);
      });
  if (!metrics.ok()) {
    spdlog::error("shard {}: metrics: {}", shard_id,
                  std::string(metrics.status().message()));
    server.Shutdown();
    return 1;
  }
  if (*metrics != nullptr) {
    spdlog::info("shard {}: metrics at http://{}:{}/metrics", shard_id,
                 config.metrics.bind, (*metrics)->port());
  }
  std::unique_ptr<MemberRegistration> member;
  if (config.coordination.enabled()) {
    absl::StatusOr<std::unique_ptr<MemberRegistration>> registered =
        MemberRegistration::Start(config, ServerMember(start, *listen, *port));
    if (!registered.ok()) {
      spdlog::error("shard {}: {}", shard_id,
                    std::string(registered.status().message()));
      server.Shutdown();
      return 1;
    }
    member = std::move(*registered);
    spdlog::info("shard {}: registered as {}", shard_id, member->key());
  }
  return Stop(start, events.Wait(), server, metrics->get());
}

// A job that leaves its model to the workers: the declaration this shard
// kept (a restart), or the first one a worker sends, into start->config;
// the shard then serves where it waited. Returns the exit status when the
// process is to end instead (an error, or a signal before any
// declaration).
std::optional<int> AwaitModel(DaemonStart* start) {
  const int shard_id = start->id;
  const std::string kept = DeclarationPath(start->config, shard_id);
  if (start->flags.Has("fresh") && !kept.empty()) std::remove(kept.c_str());
  absl::StatusOr<std::optional<JobConfig>> restored =
      KeptDeclaration(start->config, shard_id);
  if (!restored.ok() || *restored) {
    if (!restored.ok()) {
      spdlog::error("shard {}: {}", shard_id,
                    std::string(restored.status().message()));
      return 1;
    }
    spdlog::info("shard {}: serves the model its workers declared ({})",
                 shard_id, kept);
    start->config = std::move(**restored);
    return std::nullopt;
  }
  StopEvents events;
  if (!events.ok()) return 1;
  DeclarationServer waiting(start->config, shard_id,
                            start->flags.Get("launch", ""),
                            [&events] { events.Notify(); });
  absl::StatusOr<std::string> listen = ListenAddress(*start);
  absl::StatusOr<int> port =
      listen.ok() ? waiting.Start(*listen) : listen.status();
  absl::Status written = port.status();
  if (port.ok() && start->flags.Has("port_file")) {
    written =
        WritePortFile("port_file", start->flags.Get("port_file", ""), *port);
  }
  if (!written.ok()) {
    spdlog::error("shard {}: {}", shard_id, std::string(written.message()));
    return 1;
  }
  spdlog::info(
      "shard {}/{} of job '{}' listening on port {}: waits for its workers "
      "to declare the model",
      shard_id, start->config.num_shards(), start->config.job_id, *port);
  const int signal_number = events.Wait();
  std::optional<JobConfig> declared = waiting.declared();
  waiting.Shutdown();
  if (signal_number != 0 || !declared) {
    spdlog::info("shard {}: signal {} received before any declaration",
                 shard_id, signal_number);
    return 0;
  }
  start->config = std::move(*declared);
  // The shard serves on the port its workers found it at.
  start->flags.values["listen"] = WithPort(*listen, *port);
  return std::nullopt;
}

int Run(int argc, char** argv) {
  StopEvents::BlockSignals();
  int exit_code = 0;
  std::optional<DaemonStart> start = StartDaemon(
      {"paramd-server",
       kUsage,
       "shard",
       {"listen", "port_file", "launch", "checkpoint_dir", "peer", "ack_log"},
       {"fresh", "backup"}},
      argc, argv, &exit_code);
  if (!start) return exit_code;
  if (start->flags.Has("checkpoint_dir")) {
    // Where checkpoints go on this node (a volume in a container, say),
    // whatever the job file says.
    start->config.checkpoint.dir = start->flags.Get("checkpoint_dir", "");
  }
  const bool backup = start->flags.Has("backup");
  if (backup && !start->config.replication.enabled()) {
    std::fprintf(stderr,
                 "paramd-server: --backup: the job has no replicas "
                 "(replication.factor 1)\n");
    return 1;
  }
  if (start->config.awaits_declaration()) {
    if (std::optional<int> exit_code = AwaitModel(&*start)) return *exit_code;
  }
  absl::StatusOr<std::unique_ptr<ParameterServer>> server =
      ParameterServer::Create(
          start->config, start->id, nullptr,
          ShardOptions{nullptr, start->flags.Has("fresh"), backup});
  if (!server.ok()) {
    std::fprintf(stderr, "paramd-server: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  (*server)->shard()->set_launch(start->flags.Get("launch", ""));
  return Serve(*start, **server);
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Run(argc, argv); }
