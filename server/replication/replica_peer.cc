#include "server/replication/replica_peer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/config/job_config.h"
#include "spdlog/spdlog.h"

namespace paramd {

void PeerSlot::Set(Connect connect, std::string address) {
  connect_ = std::move(connect);
  absl::MutexLock lock(&mu_);
  address_ = std::move(address);
  if (!address_.empty()) peer_ = connect_(address_);
}

std::shared_ptr<ReplicaPeer> PeerSlot::Get() const {
  absl::MutexLock lock(&mu_);
  return peer_;
}

std::string PeerSlot::Address() const {
  absl::MutexLock lock(&mu_);
  return address_.empty() ? "(its address not known yet)" : address_;
}

void PeerSlot::Learn(const std::string& sender) {
  if (sender.empty() || !connect_) return;
  absl::MutexLock lock(&mu_);
  if (!address_.empty()) return;
  spdlog::info("shard {}: its other replica is at {}", shard_, sender);
  address_ = sender;
  peer_ = connect_(sender);
}

bool PeerSlot::Adopt(const std::string& sender) {
  if (sender.empty() || !connect_) return false;
  std::string host;
  int port = 0;
  if (!ParseHostPort(sender, &host, &port).ok() || port == 0 ||
      host == "0.0.0.0" || host == "::" || host == "[::]") {
    Learn(sender);  // Not an address to reach it at.
    return false;
  }
  absl::MutexLock lock(&mu_);
  spdlog::info("shard {}: its backup starts at {}{}", shard_, sender,
               address_.empty() ? std::string()
               : address_ == sender
                   ? std::string(" again")
                   : absl::StrCat(" (it was at ", address_, ")"));
  address_ = sender;
  // A new channel even to the same address: the old one, refused while
  // the peer was down, may be waiting out gRPC's reconnect backoff.
  peer_ = connect_(sender);
  return true;
}

}  // namespace paramd
