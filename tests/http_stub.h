// Test doubles for HTTP: HttpStub, a server of fixed replies by path (a fake
// Kubernetes API, a scrape target that counts scrapes), on civetweb; and
// HttpGet, a client on libcurl. Test-only.
#ifndef PARAMD_TESTS_HTTP_STUB_H_
#define PARAMD_TESTS_HTTP_STUB_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

class CivetServer;

namespace paramd {
namespace testing {

struct HttpResponse {
  int code = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using HttpHandler = std::function<HttpResponse()>;

class HttpStub {
 public:
  // Serves GET of each path in `handlers` on 127.0.0.1 at a free port;
  // 404 for other paths. Handlers run on the server's threads.
  static absl::StatusOr<std::unique_ptr<HttpStub>> Start(
      std::map<std::string, HttpHandler> handlers);
  ~HttpStub();

  int port() const { return port_; }

 private:
  class Handler;
  HttpStub() = default;

  std::unique_ptr<CivetServer> server_;
  std::map<std::string, std::unique_ptr<Handler>> handlers_;
  int port_ = 0;
};

// GET http://host:port/path (query included) within `timeout`: the reply's
// status code, Content-Type and body. UNAVAILABLE when nothing answers.
absl::StatusOr<HttpResponse> HttpGet(
    const std::string& host, int port, const std::string& path,
    absl::Duration timeout = absl::Seconds(10));

// A port that was free a moment ago (bound and released), for a program
// that takes only a fixed port.
int FreePort();

}  // namespace testing
}  // namespace paramd

#endif  // PARAMD_TESTS_HTTP_STUB_H_
