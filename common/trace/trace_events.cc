#include "common/trace/trace_events.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/json_quote.h"

namespace paramd {
namespace {

// Whole microseconds: exact in a JSON number, and rounding both ends of
// every event the same way keeps nesting and order as they were.
int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

}  // namespace

TraceEvents::TraceEvents(const TracingConfig& config, std::string file,
                         std::string process, int pid)
    : file_(std::move(file)), pid_(pid) {
  {
    absl::MutexLock lock(&mu_);
    names_.push_back(absl::StrCat(
        "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", pid_,
        ",\"tid\":0,\"args\":{\"name\":", JsonQuote(process), "}}"));
    names_.push_back(absl::StrCat(
        "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":", pid_,
        ",\"tid\":0,\"args\":{\"sort_index\":", pid_, "}}"));
  }
  Arm(config);  // Nothing without a dir and steps.
}

bool TraceEvents::Arm(const TracingConfig& window) {
  const uint64_t from =
      static_cast<uint64_t>(std::max<int64_t>(0, window.from_step));
  const uint64_t to =
      from + static_cast<uint64_t>(std::max<int64_t>(0, window.steps));
  if (window.dir.empty() || to == from) return false;
  absl::MutexLock lock(&mu_);
  if (dir_ == window.dir && from_.load() == from && to_.load() == to) {
    return false;
  }
  if (dir_ != window.dir) lines_.clear();
  dir_ = window.dir;
  written_ = false;
  // Closed first, so that no step sees the new start with the old end.
  to_.store(0);
  from_.store(from);
  to_.store(to);
  return true;
}

bool TraceEvents::TakeDone(uint64_t clock) {
  const uint64_t to = to_.load(std::memory_order_relaxed);
  if (to == 0 || clock < to) return false;
  absl::MutexLock lock(&mu_);
  if (written_) return false;
  written_ = true;
  return true;
}

void TraceEvents::NameThread(int tid, absl::string_view name) {
  absl::MutexLock lock(&mu_);
  names_.push_back(absl::StrCat(
      "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", pid_, ",\"tid\":", tid,
      ",\"args\":{\"name\":", JsonQuote(name), "}}"));
}

void TraceEvents::Add(absl::string_view name, int tid, absl::Time begin,
                      absl::Time end, absl::string_view args) {
  if (!on()) return;
  const int64_t ts = Micros(begin);
  std::string line = absl::StrFormat(
      "{\"name\":%s,\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%d,"
      "\"dur\":%d,\"args\":{%s}}",
      JsonQuote(name), pid_, tid, ts, std::max<int64_t>(0, Micros(end) - ts),
      args);
  absl::MutexLock lock(&mu_);
  lines_.push_back(std::move(line));
}

size_t TraceEvents::events() const {
  absl::MutexLock lock(&mu_);
  return lines_.size();
}

absl::StatusOr<std::string> TraceEvents::Write() const {
  absl::MutexLock lock(&mu_);
  if (dir_.empty()) return std::string();
  if (mkdir(dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::UnavailableError(absl::StrCat(
        "tracing.dir ", dir_, ": cannot create it: ", std::strerror(errno)));
  }
  const std::string path = absl::StrCat(dir_, "/", file_, ".jsonl");
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const std::string& line : names_) out << line << '\n';
    for (const std::string& line : lines_) out << line << '\n';
    if (!out.flush()) {
      return absl::UnavailableError(
          absl::StrCat("tracing: cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("tracing: cannot rename ", tmp,
                                               ": ", std::strerror(errno)));
  }
  return path;
}

absl::StatusOr<std::string> TraceEvents::Merge(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "tracing.dir ", dir, ": cannot open it: ", std::strerror(errno)));
  }
  std::vector<std::string> files;
  while (dirent* e = readdir(d)) {
    if (absl::EndsWith(e->d_name, ".jsonl")) files.push_back(e->d_name);
  }
  closedir(d);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    return absl::NotFoundError(
        absl::StrCat("tracing.dir ", dir, " holds no .jsonl trace files"));
  }
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  for (const std::string& f : files) {
    std::ifstream in(absl::StrCat(dir, "/", f));
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      absl::StrAppend(&out, first ? "" : ",\n", line);
      first = false;
    }
  }
  return out + "\n]}\n";
}

absl::Status TraceEvents::MergeTo(const std::string& dir,
                                  const std::string& output) {
  absl::StatusOr<std::string> merged = Merge(dir);
  if (!merged.ok()) return merged.status();
  std::ofstream out(output, std::ios::trunc);
  out << *merged;
  if (!out.flush()) {
    return absl::UnavailableError(
        absl::StrCat("tracing: cannot write ", output));
  }
  return absl::OkStatus();
}

}  // namespace paramd
