#include "common/metrics/metrics_endpoint.h"

#include <CivetServer.h>
#include <arpa/inet.h>
#include <civetweb.h>

#include <cstring>
#include <exception>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"

namespace paramd {
namespace {

constexpr char kHealthBody[] = "ok\n";

// Answers GET /healthz before civetweb routes the request; everything else
// goes on to the exposer's handlers.
int AnswerHealth(mg_connection* connection) {
  const mg_request_info* request = mg_get_request_info(connection);
  if (request == nullptr || request->local_uri == nullptr ||
      std::strcmp(request->local_uri, "/healthz") != 0) {
    return 0;
  }
  const size_t size = sizeof(kHealthBody) - 1;
  mg_send_http_ok(connection, "text/plain; charset=utf-8",
                  static_cast<long long>(size));
  if (std::strcmp(request->request_method, "HEAD") != 0) {
    mg_write(connection, kHealthBody, size);
  }
  return 200;
}

// civetweb's reason for a failed start, said through its log callback on
// the starting thread while `capturing`; later messages (a client's bad
// request) are civetweb's to drop, as it does without an error log file.
thread_local bool capturing = false;
thread_local std::string start_error;

int KeepStartError(const mg_connection*, const char* message) {
  if (!capturing) return 0;
  start_error = message;
  return 1;
}

class Collector : public prometheus::Collectable {
 public:
  explicit Collector(MetricsCollector collect) : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return collect_();
  }

 private:
  const MetricsCollector collect_;
};

// "host:port" with a dotted IPv4 host and a port in [0, 65535].
absl::Status CheckAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  in_addr host;
  if (colon == std::string::npos ||
      inet_pton(AF_INET, address.substr(0, colon).c_str(), &host) != 1 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics address '", address,
        "' is not HOST:PORT with an IPv4 host (e.g. 0.0.0.0:9400; the "
        "metrics endpoint does not serve IPv6)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& address, MetricsCollector collect) {
  if (absl::Status s = CheckAddress(address); !s.ok()) return s;
  CivetCallbacks callbacks;
  callbacks.begin_request = AnswerHealth;
  callbacks.log_message = KeepStartError;
  start_error.clear();
  capturing = true;
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // civetweb copies the callbacks when it starts.
    exposer = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", address, "num_threads",
                                 "2"},
        &callbacks);
  } catch (const std::exception& e) {
    capturing = false;
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint: cannot listen on ", address, ": ",
                     start_error.empty() ? e.what() : start_error));
  }
  capturing = false;
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint: no port bound for ", address));
  }
  auto collectable = std::make_shared<Collector>(std::move(collect));
  exposer->RegisterCollectable(collectable);
  return std::unique_ptr<MetricsEndpoint>(
      new MetricsEndpoint(std::move(exposer), collectable, ports.front()));
}

MetricsEndpoint::MetricsEndpoint(
    std::unique_ptr<prometheus::Exposer> exposer,
    std::shared_ptr<prometheus::Collectable> collectable, int port)
    : exposer_(std::move(exposer)),
      collectable_(std::move(collectable)),
      port_(port) {}

MetricsEndpoint::~MetricsEndpoint() { Stop(); }

void MetricsEndpoint::Stop() { exposer_.reset(); }

}  // namespace paramd
