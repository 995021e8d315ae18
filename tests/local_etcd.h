// A single-member etcd for tests (Debian's etcd-server): its data in a
// scratch folder, its client and peer sockets (unix sockets, so no port is
// fixed) in a short folder of their own under /tmp. A test that uses it
// links :skip_main and skips with MissingPrograms({"etcd"}) where etcd is
// not installed.
#ifndef PARAMD_TESTS_LOCAL_ETCD_H_
#define PARAMD_TESTS_LOCAL_ETCD_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/config/job_config.h"
#include "common/coord/rpc/etcd_client.h"
#include "tests/subprocess.h"

namespace paramd::testing {

class LocalEtcd {
 public:
  // TLS for its clients: its certificate and key (PEM), and whether it
  // asks clients for a certificate signed by that one (--client-cert-auth).
  struct Tls {
    std::string cert;
    std::string key;
    bool client_auth = false;
  };

  // Starts it (serving TLS with `tls`) and returns once it serves clients;
  // fails the test when it does not within 60 s.
  LocalEtcd() : LocalEtcd(nullptr) {}
  explicit LocalEtcd(const Tls* tls);
  // Kills it and removes its sockets' folder.
  ~LocalEtcd();
  LocalEtcd(const LocalEtcd&) = delete;
  LocalEtcd& operator=(const LocalEtcd&) = delete;

  // Where clients reach it ("unix:PATH").
  const std::string& endpoint() const { return endpoint_; }
  // An endpoint in the same folder where nothing listens.
  std::string DeadEndpoint() const;
  // SIGKILLs it.
  void Kill();

 private:
  std::string dir_;
  std::string endpoint_;
  std::unique_ptr<Subprocess> process_;
};

// A job `job_id` coordinated by the etcd at `endpoint`, with leases of
// 2 s (and nothing else set).
JobConfig CoordinatedConfig(const std::string& endpoint,
                            const std::string& job_id);

// The next event of `watch` (those read and not yet taken wait in
// `pending`), waiting for it up to `timeout`; fails the test when none
// comes.
EtcdEvent NextEvent(EtcdWatch* watch, std::vector<EtcdEvent>* pending,
                    absl::Duration timeout = absl::Seconds(90));

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_LOCAL_ETCD_H_
