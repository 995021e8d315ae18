#include "tools/ctl/server_watch.h"

namespace paramd {

ServerWatch::ServerWatch(int servers, absl::Duration lease)
    : lease_(lease), last_heard_(servers, absl::InfinitePast()) {}

void ServerWatch::Started(int shard, absl::Time now) {
  last_heard_[shard] = now;
}

std::vector<int> ServerWatch::Observe(const std::vector<bool>& answered,
                                      const std::vector<bool>& running,
                                      absl::Time now) {
  std::vector<int> silent;
  for (size_t k = 0; k < last_heard_.size(); ++k) {
    if (!running[k]) continue;
    if (answered[k]) {
      last_heard_[k] = now;
    } else if (now - last_heard_[k] > lease_) {
      silent.push_back(static_cast<int>(k));
    }
  }
  return silent;
}

}  // namespace paramd
