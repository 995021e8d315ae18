#include "common/coord/rpc/coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace paramd {

absl::StatusOr<std::unique_ptr<EtcdClient>> ConnectCoordinator(
    const CoordinationConfig& coordination) {
  EtcdClient::Options options;
  options.timeout =
      std::min(absl::Seconds(5), absl::Seconds(coordination.lease_seconds) / 3);
  absl::StatusOr<std::unique_ptr<EtcdClient>> client =
      EtcdClient::Connect(coordination.etcd, options);
  if (!client.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordination.etcd: ", client.status().message()));
  }
  return client;
}

}  // namespace paramd
