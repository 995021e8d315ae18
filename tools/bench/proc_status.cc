#include "tools/bench/proc_status.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace paramd {

namespace {

std::string ProcDir(pid_t pid) {
  return pid == 0 ? std::string("/proc/self") : absl::StrCat("/proc/", pid);
}

// The number after "`key`:" in the status file at `path`; -1 if none.
int64_t StatusFileValue(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    int64_t value = -1;
    std::istringstream(line.substr(key.size() + 1)) >> value;
    return value;
  }
  return -1;
}

}  // namespace

int64_t ProcStatusValue(pid_t pid, const std::string& key) {
  return StatusFileValue(ProcDir(pid) + "/status", key);
}

int64_t ContextSwitches(pid_t pid) {
  std::error_code error;
  std::filesystem::directory_iterator tasks(ProcDir(pid) + "/task", error);
  if (error) return -1;
  int64_t sum = 0;
  for (const auto& task : tasks) {
    const std::string status = task.path().string() + "/status";
    for (const char* key :
         {"voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"}) {
      const int64_t n = StatusFileValue(status, key);
      if (n > 0) sum += n;
    }
  }
  return sum;
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
