// TcpRelay: a loopback TCP relay for tests, between one client and a
// server, that can go silent the way a vanished host does — it stops
// passing bytes either way but keeps both connections open, so neither
// end sees a close. It tells when the server closed its side.
//
// Thread-safe.
#ifndef PARAMD_TESTS_TCP_RELAY_H_
#define PARAMD_TESTS_TCP_RELAY_H_

#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace paramd::testing {

class TcpRelay {
 public:
  // Listens on 127.0.0.1 (port 0) for one client and relays it to
  // `target` ("127.0.0.1:PORT").
  explicit TcpRelay(const std::string& target);
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  // Where the client connects ("127.0.0.1:PORT").
  std::string address() const { return address_; }
  // From now on no byte passes either way; both connections stay open.
  void Silence();
  // Waits up to `timeout` for the server to close its connection (or
  // reset it); whether it did.
  bool AwaitServerClosed(absl::Duration timeout);

 private:
  void Run();

  std::string target_;
  std::string address_;
  int listener_ = -1;
  int wake_[2] = {-1, -1};  // A pipe that ends Run's poll.
  std::thread thread_;
  absl::Mutex mu_;
  bool silent_ ABSL_GUARDED_BY(mu_) = false;
  bool server_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_TCP_RELAY_H_
