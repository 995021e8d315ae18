#include "tools/bench/server_processes.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace paramd {

std::vector<std::string> RemoteHosts::Launch(
    int index, std::vector<std::string> command) const {
  const int at = index % static_cast<int>(hosts.size());
  std::vector<std::string> words;
  for (const std::string& word : launch) {
    words.push_back(absl::StrReplaceAll(
        word, {{"{host}", absl::StrCat(at)}, {"{addr}", hosts[at]}}));
  }
  words.insert(words.end(), command.begin(), command.end());
  return words;
}

absl::StatusOr<RemoteHosts> RemoteHostsFromFlags(const ParsedFlags& flags,
                                                 const std::string& role) {
  const std::string hosts_flag = role + "_hosts",
                    launch_flag = role + "_launch";
  RemoteHosts where;
  if (flags.Has(hosts_flag) != flags.Has(launch_flag)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", hosts_flag, " and --", launch_flag, " go together"));
  }
  if (!flags.Has(hosts_flag)) return where;
  where.hosts =
      absl::StrSplit(flags.Get(hosts_flag, ""), ',', absl::SkipEmpty());
  where.launch =
      absl::StrSplit(flags.Get(launch_flag, ""), ' ', absl::SkipEmpty());
  if (where.hosts.empty() || where.launch.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", hosts_flag, " needs addresses (A,B,...) and --",
                     launch_flag, " a command prefix"));
  }
  return where;
}

absl::StatusOr<std::unique_ptr<ServerProcesses>> ServerProcesses::Start(
    const std::string& binary, const std::string& job_path, int shards,
    const std::string& dir, const std::string& tag, absl::Duration timeout,
    const RemoteHosts* where) {
  auto servers = std::unique_ptr<ServerProcesses>(new ServerProcesses());
  servers->binary_ = binary;
  servers->job_path_ = job_path;
  std::vector<std::string> port_files, hosts;
  for (int k = 0; k < shards; ++k) {
    port_files.push_back(absl::StrCat(dir, "/", tag, "-shard-", k, ".port"));
    std::remove(port_files.back().c_str());
    std::vector<std::string> command = {
        binary,          "--job",       job_path,          "--shard",
        absl::StrCat(k), "--port_file", port_files.back(), "--log_level",
        "warn"};
    hosts.push_back("127.0.0.1");
    if (where != nullptr && !where->empty()) {
      hosts.back() = where->host(k);
      command.push_back("--listen");
      command.push_back(absl::StrCat(hosts.back(), ":0"));
      command = where->Launch(k, std::move(command));
    }
    absl::StatusOr<int> index =
        servers->supervisor_.Spawn(absl::StrCat("server ", k), command);
    if (!index.ok()) return index.status();
    servers->child_.push_back(*index);
  }
  servers->addresses_.assign(shards, "");
  const absl::Time deadline = absl::Now() + timeout;
  for (int ready = 0; ready < shards;) {
    for (int k : servers->supervisor_.Poll(absl::Milliseconds(20))) {
      const ChildInfo& child = servers->supervisor_.child(k);
      return absl::UnavailableError(
          absl::StrCat(child.name, " exited at start: ", child.last_line));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("the servers of ", job_path, " did not listen within ",
                       absl::FormatDuration(timeout)));
    }
    for (int k = 0; k < shards; ++k) {
      std::ifstream in(port_files[k]);
      int port = 0;
      if (servers->addresses_[k].empty() && in >> port && port > 0) {
        servers->addresses_[k] = absl::StrCat(hosts[k], ":", port);
        ++ready;
      }
    }
  }
  return servers;
}

ServerProcesses::~ServerProcesses() { supervisor_.StopAll(absl::Seconds(5)); }

std::vector<int> ServerProcesses::Poll(absl::Duration timeout) {
  std::vector<int> exited = std::move(exited_);
  exited_.clear();
  if (!exited.empty()) timeout = absl::ZeroDuration();
  for (int i : supervisor_.Poll(timeout)) exited.push_back(i);
  return exited;
}

absl::StatusOr<pid_t> ServerProcesses::Restart(int shard) {
  const int old = child_[shard];
  if (kill(supervisor_.child(old).pid, SIGKILL) != 0) {
    return absl::InternalError(
        absl::StrCat("kill server ", shard, ": ", std::strerror(errno)));
  }
  while (supervisor_.child(old).running) {
    for (int i : supervisor_.Poll(absl::Milliseconds(20))) {
      if (i != old) exited_.push_back(i);
    }
  }
  killed_peak_rss_ =
      std::max(killed_peak_rss_, supervisor_.child(old).peak_rss_bytes);
  absl::StatusOr<int> index = supervisor_.Spawn(
      absl::StrCat("server ", shard),
      {binary_, "--job", job_path_, "--shard", absl::StrCat(shard), "--listen",
       addresses_[shard], "--log_level", "info"});
  if (!index.ok()) return index.status();
  child_[shard] = *index;
  return supervisor_.child(*index).pid;
}

}  // namespace paramd
