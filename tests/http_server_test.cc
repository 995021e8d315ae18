// HttpServer and HttpGet over real sockets on 127.0.0.1 (port 0).
#include "common/metrics/http_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"

namespace paramd {
namespace {

std::unique_ptr<HttpServer> Serve() {
  std::map<std::string, HttpHandler> handlers;
  handlers["/metrics"] = [] {
    return HttpResponse{200, "text/plain; version=0.0.4", "m 1\n"};
  };
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start("127.0.0.1:0", std::move(handlers));
  REQUIRE(server.ok());
  REQUIRE((*server)->port() > 0);
  return *std::move(server);
}

// Sends `request` as raw bytes and returns everything the server answers.
std::string Raw(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n =
        send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // The server may stop reading a request too large.
    sent += static_cast<size_t>(n);
  }
  shutdown(fd, SHUT_WR);
  std::string reply;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) reply.append(buf, n);
  close(fd);
  return reply;
}

TEST_CASE("GET of a known path answers its handler's reply", "[http]") {
  std::unique_ptr<HttpServer> server = Serve();
  absl::StatusOr<HttpResponse> r =
      HttpGet("127.0.0.1", server->port(), "/metrics?x=1");
  REQUIRE(r.ok());
  CHECK(r->code == 200);
  CHECK(r->body == "m 1\n");
  CHECK(r->content_type == "text/plain; version=0.0.4");
  // Again: one connection after another.
  CHECK(HttpGet("127.0.0.1", server->port(), "/metrics")->body == "m 1\n");
}

TEST_CASE("unknown paths, other methods and bad requests are refused",
          "[http]") {
  std::unique_ptr<HttpServer> server = Serve();
  CHECK(HttpGet("127.0.0.1", server->port(), "/nothing")->code == 404);
  const int port = server->port();
  CHECK(absl::StartsWith(Raw(port, "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
                         "HTTP/1.1 405 "));
  CHECK(absl::StartsWith(Raw(port, "hello\r\n\r\n"), "HTTP/1.1 400 "));
  const std::string head =
      Raw(port, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(absl::StartsWith(head, "HTTP/1.1 200 "));
  CHECK(absl::StrContains(head, "Content-Length: 4\r\n"));
  CHECK(absl::EndsWith(head, "\r\n\r\n"));  // No body.
  const std::string huge = "GET /metrics HTTP/1.1\r\nX: " +
                           std::string(HttpServer::kMaxRequestBytes, 'a');
  CHECK(absl::StartsWith(Raw(port, huge), "HTTP/1.1 431 "));
  // A client that hung up before finishing its request costs nothing.
  CHECK(Raw(port, "GET /met").empty());
  CHECK(HttpGet("127.0.0.1", port, "/metrics")->code == 200);
}

TEST_CASE("a port in use and a bad address are errors; Stop ends serving",
          "[http]") {
  std::unique_ptr<HttpServer> server = Serve();
  const std::string taken = "127.0.0.1:" + std::to_string(server->port());
  absl::StatusOr<std::unique_ptr<HttpServer>> second =
      HttpServer::Start(taken, {});
  REQUIRE_FALSE(second.ok());
  CHECK(absl::StrContains(second.status().message(), taken));
  CHECK_FALSE(HttpServer::Start("nonsense", {}).ok());
  const int port = server->port();
  server->Stop();
  server->Stop();  // Idempotent.
  CHECK_FALSE(HttpGet("127.0.0.1", port, "/metrics").ok());
}

}  // namespace
}  // namespace paramd
