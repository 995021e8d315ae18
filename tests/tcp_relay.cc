#include "tests/tcp_relay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/config/job_config.h"

namespace paramd::testing {
namespace {

[[noreturn]] void Fail(const char* what) {
  perror(what);
  std::abort();
}

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Copies what `from` has into `to`; false once `from` is closed or fails.
bool Pass(int from, int to) {
  char buffer[64 << 10];
  const ssize_t n = read(from, buffer, sizeof(buffer));
  if (n <= 0) return false;
  for (ssize_t done = 0; done < n;) {
    const ssize_t w = write(to, buffer + done, static_cast<size_t>(n - done));
    if (w <= 0) return false;
    done += w;
  }
  return true;
}

}  // namespace

TcpRelay::TcpRelay(const std::string& target) : target_(target) {
  listener_ = socket(AF_INET, SOCK_STREAM, 0);
  if (listener_ < 0) Fail("relay socket");
  sockaddr_in a = Loopback(0);
  if (bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(listener_, 1) != 0) {
    Fail("relay bind");
  }
  socklen_t len = sizeof(a);
  getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
  address_ = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  if (pipe(wake_) != 0) Fail("relay pipe");
  thread_ = std::thread([this] { Run(); });
}

TcpRelay::~TcpRelay() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  (void)!write(wake_[1], "x", 1);
  thread_.join();
  close(listener_);
  close(wake_[0]);
  close(wake_[1]);
}

void TcpRelay::Silence() {
  absl::MutexLock lock(&mu_);
  silent_ = true;
  (void)!write(wake_[1], "x", 1);
}

bool TcpRelay::AwaitServerClosed(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&server_closed_), timeout);
}

void TcpRelay::Run() {
  // The client: accepted while watching for the end.
  pollfd first[2] = {{listener_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
  if (poll(first, 2, -1) <= 0 || (first[1].revents & POLLIN) != 0) return;
  const int client = accept(listener_, nullptr, nullptr);
  if (client < 0) return;
  std::string host;
  int target_port = 0;
  if (!ParseHostPort(target_, &host, &target_port).ok()) std::abort();
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(target_port);
  if (connect(server, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    Fail("relay connect");
  }
  for (;;) {
    bool silent;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      silent = silent_;
    }
    // Silent: nothing is read, only the server's close is watched for
    // (POLLRDHUP comes with its FIN whether or not bytes are unread).
    pollfd fds[3] = {
        {wake_[0], POLLIN, 0},
        {server, static_cast<short>(silent ? POLLRDHUP : POLLIN | POLLRDHUP),
         0},
        {client, static_cast<short>(silent ? 0 : POLLIN), 0}};
    if (poll(fds, 3, -1) < 0) continue;
    if ((fds[0].revents & POLLIN) != 0) {
      char drain[16];
      (void)!read(wake_[0], drain, sizeof(drain));
      continue;
    }
    if ((fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0 && silent) {
      absl::MutexLock lock(&mu_);
      server_closed_ = true;
      break;
    }
    if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
        !Pass(server, client)) {
      absl::MutexLock lock(&mu_);
      server_closed_ = true;
      break;
    }
    if ((fds[2].revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
        !Pass(client, server)) {
      break;
    }
  }
  close(client);
  close(server);
}

}  // namespace paramd::testing
