#include "tests/local_etcd.h"

#include <signal.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/skip_main.h"
#include "tests/test_files.h"

namespace paramd::testing {

LocalEtcd::LocalEtcd(const Tls* tls) {
  const std::string etcd = FindProgram("etcd");
  REQUIRE_FALSE(etcd.empty());
  // etcd names a unix socket HOST:PORT, relative to its working folder:
  // it runs in dir_, its sockets "client:0" and "peer:0" there. A socket's
  // path must fit in 108 bytes, which a test's scratch folder may not: the
  // sockets go in a short folder of their own, the data in the scratch.
  std::string short_dir = "/tmp/paramd-etcd-XXXXXX";
  REQUIRE(mkdtemp(short_dir.data()) != nullptr);
  dir_ = short_dir;
  const std::string data = NewTempDir() + "/etcd";
  // A TLS socket is "unixs://".
  const std::string client =
      tls != nullptr ? "unixs://client:0" : "unix://client:0";
  std::string command = "cd '" + dir_ + "' && exec '" + etcd +
                        "' --name local --data-dir '" + data +
                        "' --listen-client-urls " + client +
                        " --advertise-client-urls " + client +
                        " --listen-peer-urls unix://peer:0"
                        " --initial-advertise-peer-urls unix://peer:0"
                        " --initial-cluster local=unix://peer:0"
                        " --log-outputs stderr";
  if (tls != nullptr) {
    command += " --cert-file '" + tls->cert + "' --key-file '" + tls->key + "'";
    if (tls->client_auth) {
      command += " --client-cert-auth --trusted-ca-file '" + tls->cert + "'";
    }
  }
  process_ = std::make_unique<Subprocess>(
      std::vector<std::string>{"/bin/sh", "-c", command});
  endpoint_ = "unix:" + dir_ + "/client:0";
  const bool ready =
      process_->ReadUntil(tls != nullptr ? "serving client requests"
                                         : "serving insecure client requests",
                          absl::Seconds(60));
  INFO(process_->output());
  REQUIRE(ready);
}

LocalEtcd::~LocalEtcd() { Kill(); }

std::string LocalEtcd::DeadEndpoint() const {
  return "unix:" + dir_ + "/nothing:0";
}

void LocalEtcd::Kill() {
  if (process_ == nullptr) return;
  process_->Signal(SIGKILL);
  process_->Wait(absl::Seconds(30));
  process_.reset();
  std::error_code e;  // The sockets' folder; the data stays with the test's.
  std::filesystem::remove_all(dir_, e);
}

JobConfig CoordinatedConfig(const std::string& endpoint,
                            const std::string& job_id) {
  JobConfig c;
  c.job_id = job_id;
  c.coordination.etcd = {endpoint};
  c.coordination.lease_seconds = 2;
  return c;
}

EtcdEvent NextEvent(EtcdWatch* watch, std::vector<EtcdEvent>* pending,
                    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (pending->empty() && absl::Now() < deadline) {
    absl::StatusOr<std::vector<EtcdEvent>> more = watch->Next(deadline);
    REQUIRE(more.ok());
    pending->insert(pending->end(), more->begin(), more->end());
  }
  REQUIRE_FALSE(pending->empty());
  EtcdEvent e = pending->front();
  pending->erase(pending->begin());
  return e;
}

}  // namespace paramd::testing
