// HttpServer: a small HTTP/1.1 server for GET requests to fixed paths —
// what a Prometheus scrape, a liveness probe or a test needs, no more.
//
// One thread accepts and answers one connection at a time (Connection:
// close); each connection gets a few seconds in all to send its request
// (at most 16 KiB of headers) and take the reply, so a stalled client
// cannot hold the server for longer. GET and HEAD only (405 otherwise),
// 404 for unknown paths; the query string is ignored.
#ifndef PARAMD_COMMON_METRICS_HTTP_SERVER_H_
#define PARAMD_COMMON_METRICS_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace paramd {

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse()>;

class HttpServer {
 public:
  // How long one connection may take, request and reply together.
  static constexpr absl::Duration kConnectionDeadline = absl::Seconds(5);
  static constexpr size_t kMaxRequestBytes = 16 * 1024;

  // Listens on `address` ("host:port"; port 0 picks a free one; host
  // "0.0.0.0" or "[::]" for every interface) and serves `handlers` by path.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const std::string& address, std::map<std::string, HttpHandler> handlers);
  ~HttpServer();  // Stops.

  int port() const { return port_; }
  // Stops serving, joins the thread and closes the socket; idempotent.
  void Stop();

 private:
  HttpServer(int listen_fd, int wake_read, int wake_write, int port,
             std::map<std::string, HttpHandler> handlers);
  void Loop();
  void Serve(int fd);

  const int listen_fd_;
  const int wake_read_;
  const int wake_write_;
  const int port_;
  const std::map<std::string, HttpHandler> handlers_;
  std::thread thread_;
  bool stopped_ = false;  // Touched only by Stop's caller.
};

// GET http://host:port/path with a deadline; the reply's status code and
// body (the headers dropped). For tests and tools.
absl::StatusOr<HttpResponse> HttpGet(
    const std::string& host, int port, const std::string& path,
    absl::Duration timeout = absl::Seconds(10));

}  // namespace paramd

#endif  // PARAMD_COMMON_METRICS_HTTP_SERVER_H_
