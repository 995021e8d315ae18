// paramd-serve --model DIR: serves an exported model (paramctl export) to
// serving processes over gRPC (proto LookupService: rows by id, tensors by
// name), read-only.
//
//   paramd-serve --model DIR [--listen HOST:PORT] [--port_file PATH]
//                [--job J.yaml] [--poll_seconds S]
//
// It loads DIR's newest full export with every incremental one after it,
// and looks for new exports every --poll_seconds (default 1): an
// incremental one is applied in place, a new full one replaces the model.
// --listen defaults to 127.0.0.1:0 (a port the system picks, printed, and
// written to --port_file); --job takes the job's security section (TLS and
// token), as its servers use. SIGINT or SIGTERM stop it.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/flags.h"
#include "common/config/job_file.h"
#include "common/launch/daemon_start.h"
#include "common/rpc/credentials.h"
#include "server/checkpoint/file_system.h"
#include "tools/serve/rpc/lookup_server.h"
#include "tools/serve/served_model.h"

namespace paramd {
namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "paramd-serve: %s\n", what.c_str());
  return 1;
}

std::string Rows(const ServedModel& model) {
  std::vector<std::string> parts;
  for (const auto& [name, n] : model.rows()) {
    parts.push_back(absl::StrCat(name, " ", n, " rows"));
  }
  return parts.empty() ? "no tables" : absl::StrJoin(parts, ", ");
}

int Main(int argc, char** argv) {
  auto flags = ParseFlags(
      argc, argv, {"model", "listen", "port_file", "job", "poll_seconds"}, {});
  if (!flags.ok() || !flags->Has("model")) {
    std::fprintf(stderr,
                 "paramd-serve: %s\nusage: paramd-serve --model DIR "
                 "[--listen HOST:PORT] [--port_file PATH] [--job J.yaml] "
                 "[--poll_seconds S]\n",
                 flags.ok() ? "--model is required"
                            : std::string(flags.status().message()).c_str());
    return 2;
  }
  const double poll = std::atof(flags->Get("poll_seconds", "1").c_str());
  if (!(poll > 0)) return Fail("--poll_seconds must be > 0");
  JobSecurity security;
  if (flags->Has("job")) {
    absl::StatusOr<JobConfig> job = LoadJobConfig(flags->Get("job", ""));
    if (!job.ok()) return Fail(std::string(job.status().message()));
    absl::StatusOr<JobSecurity> loaded = LoadSecurity(job->security);
    if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
    security = *std::move(loaded);
  }
  // The signals are taken by sigtimedwait below, not by handlers.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  const std::string dir = flags->Get("model", "");
  absl::StatusOr<std::unique_ptr<ServedModel>> model =
      ServedModel::Load(LocalFileSystem(), dir);
  if (!model.ok()) return Fail(std::string(model.status().message()));
  absl::StatusOr<std::unique_ptr<LookupServer>> server = LookupServer::Start(
      model->get(), flags->Get("listen", "127.0.0.1:0"), security);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  std::printf("paramd-serve: export %llu of %s (%s), listening on port %d\n",
              static_cast<unsigned long long>((*model)->sequence()),
              dir.c_str(), Rows(**model).c_str(), (*server)->port());
  std::fflush(stdout);
  if (flags->Has("port_file")) {
    absl::Status s = WritePortFile("--port_file", flags->Get("port_file", ""),
                                   (*server)->port());
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  std::string last_error;
  while (true) {
    timespec wait;
    wait.tv_sec = static_cast<time_t>(poll);
    wait.tv_nsec = static_cast<long>((poll - wait.tv_sec) * 1e9);
    const int signal = sigtimedwait(&stop, nullptr, &wait);
    if (signal == SIGINT || signal == SIGTERM) break;
    absl::StatusOr<int> taken = (*model)->Refresh();
    if (!taken.ok()) {
      // Said once until it changes: the next poll tries again.
      if (std::string(taken.status().message()) != last_error) {
        last_error = std::string(taken.status().message());
        std::fprintf(stderr, "paramd-serve: %s\n", last_error.c_str());
      }
      continue;
    }
    last_error.clear();
    if (*taken > 0) {
      std::printf("paramd-serve: now export %llu (%s)\n",
                  static_cast<unsigned long long>((*model)->sequence()),
                  Rows(**model).c_str());
      std::fflush(stdout);
    }
  }
  std::printf("paramd-serve: stopping\n");
  return 0;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Main(argc, argv); }
