#include "tools/bench/proc_status.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace paramd {

int64_t ProcStatusValue(pid_t pid, const std::string& key) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    int64_t value = -1;
    std::istringstream(line.substr(key.size() + 1)) >> value;
    return value;
  }
  return -1;
}

namespace {

int64_t KbToBytes(int64_t kb) { return kb < 0 ? -1 : kb * 1024; }

}  // namespace

int64_t RssBytes(pid_t pid) { return KbToBytes(ProcStatusValue(pid, "VmRSS")); }

int64_t PeakRssBytes(pid_t pid) {
  return KbToBytes(ProcStatusValue(pid, "VmHWM"));
}

int64_t ThreadCount(pid_t pid) { return ProcStatusValue(pid, "Threads"); }

}  // namespace paramd
