#include "tests/http_stub.h"

#include <CivetServer.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace paramd {
namespace testing {

class HttpStub::Handler : public CivetHandler {
 public:
  explicit Handler(HttpHandler handler) : handler_(std::move(handler)) {}
  bool handleGet(CivetServer*, mg_connection* connection) override {
    const HttpResponse r = handler_();
    mg_printf(connection,
              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
              "Connection: close\r\n\r\n",
              r.code, r.code == 200 ? "OK" : "Error", r.content_type.c_str(),
              r.body.size());
    mg_write(connection, r.body.data(), r.body.size());
    return true;
  }

 private:
  const HttpHandler handler_;
};

absl::StatusOr<std::unique_ptr<HttpStub>> HttpStub::Start(
    std::map<std::string, HttpHandler> handlers) {
  std::unique_ptr<HttpStub> stub(new HttpStub);
  try {
    stub->server_ = std::make_unique<CivetServer>(std::vector<std::string>{
        "listening_ports", "127.0.0.1:0", "num_threads", "2"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("HttpStub: ", e.what()));
  }
  const std::vector<int> ports = stub->server_->getListeningPorts();
  if (ports.empty()) return absl::UnavailableError("HttpStub: no port");
  stub->port_ = ports.front();
  for (auto& [path, handler] : handlers) {
    auto h = std::make_unique<Handler>(std::move(handler));
    // An exact match: civetweb's "$" ends the pattern.
    stub->server_->addHandler(path + "$", h.get());
    stub->handlers_[path] = std::move(h);
  }
  return stub;
}

HttpStub::~HttpStub() {
  if (server_ != nullptr) server_->close();  // Joins before handlers go.
}

namespace {

size_t Append(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(const std::string& host, int port,
                                     const std::string& path,
                                     absl::Duration timeout) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  absl::Cleanup cleanup = [curl] { curl_easy_cleanup(curl); };
  const std::string url = absl::StrCat("http://", host, ":", port, path);
  HttpResponse response;
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(timeout)));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  const CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) {
    return absl::UnavailableError(
        absl::StrCat("GET ", url, ": ", curl_easy_strerror(rc)));
  }
  long code = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
  response.code = static_cast<int>(code);
  char* type = nullptr;
  curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
  response.content_type = type != nullptr ? type : "";
  return response;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

}  // namespace testing
}  // namespace paramd
