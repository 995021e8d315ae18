#include "tools/ctl/local_coordinator.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/coord/rpc/etcd_client.h"

namespace paramd {

std::string FindEtcd() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/etcd");
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

absl::StatusOr<LocalCoordinator> StartLocalCoordinator(Supervisor& sup,
                                                       const std::string& etcd,
                                                       const std::string& dir,
                                                       absl::Duration timeout) {
  const std::string home = dir + "/etcd";
  std::error_code ignored;
  std::filesystem::create_directories(home, ignored);
  // Unix sockets: no port to choose, nothing reachable from elsewhere.
  // etcd takes only "unix://NAME:PORT", relative to its working folder:
  // it runs in `home`.
  const std::string client = "unix://client:0";
  const std::string peer = "unix://peer:0";
  absl::StatusOr<int> child =
      sup.Spawn("etcd", {"/usr/bin/env",
                         "-C",
                         home,
                         etcd,
                         "--name",
                         "paramd",
                         "--data-dir",
                         "data",
                         "--listen-client-urls",
                         client,
                         "--advertise-client-urls",
                         client,
                         "--listen-peer-urls",
                         peer,
                         "--initial-advertise-peer-urls",
                         peer,
                         "--initial-cluster",
                         "paramd=" + peer,
                         "--logger",
                         "zap",
                         "--log-level",
                         "warn"});
  if (!child.ok()) return child.status();
  LocalCoordinator c;
  c.endpoint = absl::StrCat("unix:", home, "/client:0");
  c.child = *child;
  EtcdClient::Options options;
  options.timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd_client =
      EtcdClient::Connect({c.endpoint}, options);
  if (!etcd_client.ok()) return etcd_client.status();
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::UnavailableError("not asked yet");
  while (true) {
    sup.Poll(absl::ZeroDuration());
    const ChildInfo& info = sup.child(c.child);
    if (!info.running) {
      return absl::UnavailableError(absl::StrCat(
          "the local etcd ", Supervisor::DescribeExit(info.wait_status),
          info.last_line.empty() ? "" : ": ", info.last_line));
    }
    last = (*etcd_client)->Get("/paramd").status();
    if (last.ok()) return c;
    if (absl::Now() >= deadline) {
      sup.Stop({c.child}, absl::Seconds(1));
      return absl::DeadlineExceededError(
          absl::StrCat("the local etcd did not serve within ",
                       absl::FormatDuration(timeout), ": ", last.message()));
    }
    sup.Poll(absl::Milliseconds(50));
  }
}

absl::StatusOr<std::string> StartLocalFence(
    Supervisor& sup, const std::string& dir, absl::Duration timeout,
    const std::function<void(const std::string&)>& say) {
  const std::string etcd = FindEtcd();
  if (etcd.empty()) {
    say("replicas without a fence: etcd is not installed (Debian: "
        "etcd-server); each backup takes over after liveness.lease_seconds "
        "of silence");
    return std::string();
  }
  ASSIGN_OR_RETURN(const LocalCoordinator c,
                   StartLocalCoordinator(sup, etcd, dir, timeout));
  say(absl::StrCat("started etcd (pid ", sup.child(c.child).pid, ") at ",
                   c.endpoint,
                   ": it fences each shard's primary (coordination.etcd "
                   "names another)"));
  return c.endpoint;
}

}  // namespace paramd
