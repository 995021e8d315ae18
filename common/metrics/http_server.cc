#include "common/metrics/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/job_config.h"

namespace paramd {
namespace {

const char* Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
  }
  return "Unknown";
}

int MillisLeft(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(absl::ToInt64Milliseconds(left)) + 1;
}

// Waits until `fd` is ready for `events` or the deadline passes.
bool WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    const int ms = MillisLeft(deadline);
    if (ms == 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, ms);
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

bool WriteAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    if (!WaitFor(fd, POLLOUT, deadline)) return false;
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Resolves host:port (host may be a name, an IPv4 address or [IPv6]).
absl::StatusOr<addrinfo*> Resolve(const std::string& address, bool passive) {
  std::string host;
  int port = 0;
  if (absl::Status s = ParseHostPort(address, &host, &port); !s.ok()) {
    return s;
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &result);
      rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", address, "': ", gai_strerror(rc)));
  }
  return result;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const std::string& address, std::map<std::string, HttpHandler> handlers) {
  absl::StatusOr<addrinfo*> resolved = Resolve(address, /*passive=*/true);
  if (!resolved.ok()) return resolved.status();
  absl::Cleanup free_info = [&] { freeaddrinfo(*resolved); };
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* ai = *resolved; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0) {
      break;
    }
    error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("HTTP server: cannot listen on ", address, ": ", error));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int port =
      ntohs(bound.ss_family == AF_INET6
                ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    close(fd);
    return absl::InternalError("HTTP server: pipe failed");
  }
  std::unique_ptr<HttpServer> server(
      new HttpServer(fd, wake[0], wake[1], port, std::move(handlers)));
  server->thread_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

HttpServer::HttpServer(int listen_fd, int wake_read, int wake_write, int port,
                       std::map<std::string, HttpHandler> handlers)
    : listen_fd_(listen_fd),
      wake_read_(wake_read),
      wake_write_(wake_write),
      port_(port),
      handlers_(std::move(handlers)) {}

HttpServer::~HttpServer() {
  Stop();
  close(wake_read_);
  close(wake_write_);
}

void HttpServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  const char byte = 0;
  (void)!write(wake_write_, &byte, 1);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);  // New connections are refused from here on.
}

void HttpServer::Loop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    Serve(fd);
    close(fd);
  }
}

void HttpServer::Serve(int fd) {
  const absl::Time deadline = absl::Now() + kConnectionDeadline;
  std::string request;
  char buf[4096];
  size_t end = std::string::npos;
  while ((end = request.find("\r\n\r\n")) == std::string::npos) {
    if (request.size() > kMaxRequestBytes) break;
    if (!WaitFor(fd, POLLIN, deadline)) return;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) return;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;
    }
    request.append(buf, static_cast<size_t>(n));
  }
  HttpResponse response;
  bool head = false;
  if (end == std::string::npos) {
    response = {431, "text/plain; charset=utf-8", "request too large\n"};
  } else {
    // "GET /path?query HTTP/1.1"
    const std::string line = request.substr(0, request.find("\r\n"));
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.")) {
      response = {400, "text/plain; charset=utf-8", "bad request line\n"};
    } else if (parts[0] != "GET" && parts[0] != "HEAD") {
      response = {405, "text/plain; charset=utf-8",
                  absl::StrCat("method ", parts[0], " not allowed\n")};
    } else {
      head = parts[0] == "HEAD";
      const std::string path = parts[1].substr(0, parts[1].find('?'));
      auto it = handlers_.find(path);
      if (it == handlers_.end()) {
        response = {404, "text/plain; charset=utf-8",
                    absl::StrCat("no page ", path, "\n")};
      } else {
        response = it->second();
      }
    }
  }
  std::string reply =
      absl::StrCat("HTTP/1.1 ", response.code, " ", Reason(response.code),
                   "\r\nContent-Type: ", response.content_type,
                   "\r\nContent-Length: ", response.body.size(),
                   "\r\nConnection: close\r\n\r\n");
  if (!head) reply += response.body;
  WriteAll(fd, reply, deadline);
  shutdown(fd, SHUT_WR);
}

absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port,
                                     const std::string& path,
                                     absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<addrinfo*> resolved =
      Resolve(absl::StrCat(host, ":", port), /*passive=*/false);
  if (!resolved.ok()) return resolved.status();
  absl::Cleanup free_info = [&] { freeaddrinfo(*resolved); };
  const addrinfo* ai = *resolved;
  const int fd =
      socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError("socket failed");
  absl::Cleanup close_fd = [fd] { close(fd); };
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
    return absl::UnavailableError(absl::StrCat("connect to ", host, ":", port,
                                               ": ", std::strerror(errno)));
  }
  if (!WaitFor(fd, POLLOUT, deadline)) {
    return absl::DeadlineExceededError("connect timed out");
  }
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect to ", host, ":", port, ": ", std::strerror(err)));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", host,
                   "\r\nConnection: close\r\n\r\n");
  if (!WriteAll(fd, request, deadline)) {
    return absl::UnavailableError("sending the request failed");
  }
  std::string reply;
  char buf[8192];
  for (;;) {
    if (!WaitFor(fd, POLLIN, deadline)) {
      return absl::DeadlineExceededError("no complete reply in time");
    }
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(std::strerror(errno));
    }
    reply.append(buf, static_cast<size_t>(n));
  }
  const size_t header_end = reply.find("\r\n\r\n");
  int code = 0;
  std::vector<std::string> status_line =
      absl::StrSplit(reply.substr(0, reply.find("\r\n")), ' ');
  if (header_end == std::string::npos || status_line.size() < 2 ||
      !absl::SimpleAtoi(status_line[1], &code)) {
    return absl::DataLossError("malformed HTTP reply");
  }
  HttpResponse response;
  response.code = code;
  response.body = reply.substr(header_end + 4);
  for (absl::string_view header :
       absl::StrSplit(reply.substr(0, header_end), "\r\n")) {
    if (absl::ConsumePrefix(&header, "Content-Type: ")) {
      response.content_type = std::string(header);
    }
  }
  return response;
}

}  // namespace paramd
