// MetricsEndpoint: a process's Prometheus endpoint, served by prometheus-cpp's
// pull exposer (civetweb underneath): GET /metrics answers with what
// `collect` returns at that moment, in the text exposition format, and
// GET /healthz answers 200 "ok" for liveness and readiness probes. Other
// paths get 404.
//
// `collect` runs on the exposer's threads, once per scrape, concurrently
// with the process's own work: it must be thread-safe and must outlive the
// endpoint. Destroying the endpoint (or Stop) stops serving and joins the
// exposer's threads; Stop and the destructor belong to the owning thread.
#ifndef PARAMD_COMMON_METRICS_METRICS_ENDPOINT_H_
#define PARAMD_COMMON_METRICS_METRICS_ENDPOINT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/metric_family.h"

namespace prometheus {
class Exposer;
class Collectable;
}  // namespace prometheus

namespace paramd {

using MetricsCollector = std::function<std::vector<prometheus::MetricFamily>()>;

class MetricsEndpoint {
 public:
  // Listens on `address` ("host:port" with an IPv4 host, e.g.
  // "127.0.0.1:0" for any free port or "0.0.0.0:9400" for every interface;
  // Debian's civetweb is built without IPv6). UNAVAILABLE when the address
  // cannot be bound, INVALID_ARGUMENT when it is not of that form.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& address, MetricsCollector collect);
  ~MetricsEndpoint();  // Stops.

  // The bound port (the chosen one when `address` said port 0).
  int port() const { return port_; }
  // Stops serving and joins the exposer's threads; idempotent.
  void Stop();

 private:
  MetricsEndpoint(std::unique_ptr<prometheus::Exposer> exposer,
                  std::shared_ptr<prometheus::Collectable> collectable,
                  int port);

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> collectable_;
  const int port_;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_METRICS_METRICS_ENDPOINT_H_
