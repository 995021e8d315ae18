#include "tools/ctl/server_fleet.h"

#include "absl/strings/str_cat.h"

namespace paramd {

ServerFleet::ServerFleet(const JobConfig& config, const RunFolder* folder,
                         Launch launch)
    : config_(config),
      folder_(folder),
      launch_(std::move(launch)),
      addresses_(config.num_shards() * config.replication.factor) {}

std::string ServerFleet::Name(int slot) const {
  return absl::StrCat(is_backup(slot) ? "backup " : "server ", shard_of(slot));
}

std::vector<std::string> ServerFleet::Argv(int slot, bool fresh) const {
  const int shard = shard_of(slot);
  const std::string& configured = is_backup(slot)
                                      ? config_.replication.backups[shard]
                                      : config_.servers[shard];
  // A restarted server listens on the port it had.
  std::vector<std::string> argv = {
      launch_.server_binary,
      "--job",
      launch_.job_path,
      "--shard",
      absl::StrCat(shard),
      "--listen",
      addresses_[slot].empty() ? configured : addresses_[slot],
      "--port_file",
      folder_->PortFile(slot),
      "--launch",
      launch_.launch,
      "--log_level",
      launch_.log_level};
  if (fresh) argv.push_back("--fresh");
  if (!launch_.checkpoint_dir.empty()) {
    argv.push_back("--checkpoint_dir");
    argv.push_back(launch_.checkpoint_dir);
  }
  if (!launch_.etcd.empty()) {
    argv.push_back("--etcd");
    argv.push_back(launch_.etcd);
  }
  if (config_.replication.enabled()) {
    if (is_backup(slot)) argv.push_back("--backup");
    const int peer = is_backup(slot) ? shard : shard + num_shards();
    if (!addresses_[peer].empty()) {
      argv.push_back("--peer");
      argv.push_back(addresses_[peer]);
    }
  }
  return argv;
}

bool ServerFleet::ReadPorts(int begin, int end) {
  bool all = true;
  for (int slot = begin; slot < end; ++slot) {
    if (!addresses_[slot].empty()) continue;
    const int port = folder_->ReadPort(slot);
    if (port <= 0) {
      all = false;
      continue;
    }
    const int shard = shard_of(slot);
    std::string host;
    int ignored = 0;
    (void)ParseHostPort(is_backup(slot) ? config_.replication.backups[shard]
                                        : config_.servers[shard],
                        &host, &ignored);
    addresses_[slot] = absl::StrCat(host, ":", port);
  }
  return all;
}

std::vector<std::string> ServerFleet::primaries() const {
  return {addresses_.begin(), addresses_.begin() + num_shards()};
}

std::vector<std::string> ServerFleet::backups() const {
  return {addresses_.begin() + num_shards(), addresses_.end()};
}

std::vector<ServerStatus> ServerFleet::Serving(
    const std::vector<ServerStatus>& by_slot) const {
  return ServingReplicas(by_slot, num_shards());
}

}  // namespace paramd
