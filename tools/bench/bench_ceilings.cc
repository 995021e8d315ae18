#include "tools/bench/bench_ceilings.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "common/base/status_macros.h"
#include "tools/bench/bench_timing.h"
#include "tools/bench/bench_util.h"

namespace paramd {
namespace {

// Bytes copied per second by memcpy between two 64 MiB buffers (larger
// than any cache here). Memory traffic is twice that: every byte is read
// once and written once.
double MemcpyBytesPerSecond(double seconds) {
  const size_t n = size_t{64} << 20;
  std::vector<char> a(n, 1), b(n, 2);
  const double t = SecondsPerCall(seconds, [&] {
    std::memcpy(b.data(), a.data(), n);
    a[0] = b[n - 1];  // Keep the copies from being elided.
    return true;
  });
  return static_cast<double>(n) / t;
}

// Memory traffic per second of an in-place axpy, y[i] += s * x[i], over
// two 64 MiB arrays: the access pattern of an optimizer step (read the
// parameter and the gradient, write the parameter back), counted the same
// way: 12 bytes per element.
// Built for the same instruction sets as the optimizers' loops.
#if !defined(__SANITIZE_THREAD__)  // as server/optimizer/optimizer.cc
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void Axpy(
    float* __restrict y, const float* __restrict x, size_t n, float s) {
  for (size_t i = 0; i < n; ++i) y[i] += s * x[i];
}

double AxpyBytesPerSecond(double seconds) {
  const size_t n = size_t{16} << 20;
  std::vector<float> x(n, 1.0f), y(n, 0.0f);
  float scale = 1e-3f;
  const double t = SecondsPerCall(seconds, [&] {
    Axpy(y.data(), x.data(), n, scale);
    scale = y[n / 2] * 1e-30f + 1e-3f;  // Keep the loop from being elided.
    return true;
  });
  return 12.0 * static_cast<double>(n) / t;
}

struct SocketPair {
  int client = -1, server = -1;
  ~SocketPair() {
    if (client >= 0) close(client);
    if (server >= 0) close(server);
  }
};

// A TCP connection over loopback on a port the OS picks.
absl::Status Connect(SocketPair* pair) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return absl::InternalError("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(listener);
    return absl::InternalError("cannot listen on 127.0.0.1:0");
  }
  pair->client = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(pair->client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
      0) {
    close(listener);
    return absl::InternalError("cannot connect over loopback");
  }
  pair->server = accept(listener, nullptr, nullptr);
  close(listener);
  if (pair->server < 0) return absl::InternalError("accept() failed");
  const int one = 1;
  setsockopt(pair->client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(pair->server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return absl::OkStatus();
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// One sender streams 1 MiB writes for about `seconds`; one receiver reads
// them. Bytes received per second.
absl::StatusOr<double> TcpBytesPerSecond(double seconds) {
  SocketPair pair;
  RETURN_IF_ERROR(Connect(&pair));
  const size_t block = size_t{1} << 20;
  std::atomic<int64_t> received{0};
  std::thread reader([&] {
    std::vector<char> buf(block);
    while (true) {
      const ssize_t r = read(pair.server, buf.data(), buf.size());
      if (r <= 0) break;
      received.fetch_add(r, std::memory_order_relaxed);
    }
  });
  std::vector<char> data(block, 7);
  const auto start = SteadyClock::now();
  while (Since(start) < seconds) {
    if (!WriteAll(pair.client, data.data(), data.size())) break;
  }
  shutdown(pair.client, SHUT_WR);
  reader.join();
  return static_cast<double>(received.load()) / Since(start);
}

// Round trips of `bytes` each way; p50 in seconds.
absl::StatusOr<double> TcpPingPongP50(int64_t bytes, double seconds) {
  SocketPair pair;
  RETURN_IF_ERROR(Connect(&pair));
  std::thread echo([&] {
    std::vector<char> buf(bytes);
    while (ReadAll(pair.server, buf.data(), buf.size()) &&
           WriteAll(pair.server, buf.data(), buf.size())) {
    }
  });
  std::vector<char> buf(bytes, 3);
  std::vector<double> rtt;
  const auto start = SteadyClock::now();
  while (Since(start) < seconds || rtt.size() < 10) {
    const auto t = SteadyClock::now();
    if (!WriteAll(pair.client, buf.data(), buf.size()) ||
        !ReadAll(pair.client, buf.data(), buf.size())) {
      break;
    }
    rtt.push_back(Since(t));
  }
  shutdown(pair.client, SHUT_WR);
  echo.join();
  return Percentile(rtt, 50);
}

}  // namespace

absl::StatusOr<Ceilings> MeasureCeilings() {
  Ceilings c;
  c.memcpy_bps = MemcpyBytesPerSecond(0.5);
  c.axpy_bps = AxpyBytesPerSecond(0.5);
  ASSIGN_OR_RETURN(c.tcp_bps, TcpBytesPerSecond(1.0));
  ASSIGN_OR_RETURN(c.tcp_rtt, TcpPingPongP50(4096, 0.3));
  std::printf("Ceilings\n");
  std::printf(
      "  memcpy 64 MiB                 %7.2f GB/s copied (%.2f GB/s of "
      "memory traffic)\n",
      c.memcpy_bps / 1e9, 2 * c.memcpy_bps / 1e9);
  std::printf("  axpy in place 2 x 64 MiB       %6.2f GB/s of memory traffic\n",
              c.axpy_bps / 1e9);
  std::printf("  raw TCP loopback, 1 MiB writes %6.2f GB/s\n", c.tcp_bps / 1e9);
  std::printf("  raw TCP 4 KiB ping-pong p50    %6.1f us\n\n", c.tcp_rtt * 1e6);
  return c;
}

}  // namespace paramd
