#include "tools/bench/worker_processes.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "common/config/job_file.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "tools/ctl/supervisor.h"

namespace paramd {
namespace {

// How long the children may take to start, register and warm up.
constexpr absl::Duration kWarmUp = absl::Seconds(120);

// The files of one cell's children, in the bench's folder: each rank's
// "warmed up" and result, and the start time the bench writes.
struct CellFiles {
  std::string dir, tag;
  std::string ready(int rank) const {
    return absl::StrCat(dir, "/", tag, "-rank-", rank, ".ready");
  }
  std::string result(int rank) const {
    return absl::StrCat(dir, "/", tag, "-rank-", rank, ".result");
  }
  std::string start() const { return absl::StrCat(dir, "/", tag, ".start"); }
};

// Writes `text` to `path` whole: readers never see part of it.
void WriteWhole(const std::string& path, const std::string& text) {
  const std::string partial = path + ".partial";
  std::ofstream(partial) << text;
  std::filesystem::rename(partial, path);
}

// The children's gate: Ready says so by a file and waits for the start
// time; the timed part lasts `seconds` from it.
class ProcessGate final : public RunGate {
 public:
  ProcessGate(CellFiles files, int rank, double seconds)
      : files_(std::move(files)), rank_(rank), seconds_(seconds) {}
  void Ready() override {
    WriteWhole(files_.ready(rank_), "ready\n");
    int64_t nanos = 0;
    const absl::Time give_up = absl::Now() + kWarmUp;
    while (absl::Now() < give_up) {
      std::ifstream in(files_.start());
      if (in >> nanos) break;
      absl::SleepFor(absl::Milliseconds(1));
    }
    // No start time (the bench is gone): the timed part is over at once,
    // and the run fails (started()).
    start_ = nanos > 0 ? absl::FromUnixNanos(nanos) : absl::InfinitePast();
    absl::SleepFor(start_ - absl::Now());
    end_ = start_ + absl::Seconds(seconds_);
  }
  bool Stopped() override { return absl::Now() >= end_; }
  bool started() const { return start_ != absl::InfinitePast(); }

 private:
  const CellFiles files_;
  const int rank_;
  const double seconds_;
  absl::Time start_, end_;
};

// What a child wrote: "ok END_UNIX_NANOS HOSTNAME" and a latency a line,
// or "error MESSAGE".
absl::Status ReadResult(const std::string& path, WorkerRun* run,
                        absl::Time* end, std::string* host) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word)) {
    return absl::UnavailableError(absl::StrCat(path, ": no result"));
  }
  if (word == "error") {
    std::string message;
    std::getline(in, message);
    return absl::UnavailableError(message);
  }
  int64_t nanos = 0;
  if (word != "ok" || !(in >> nanos >> *host)) {
    return absl::DataLossError(absl::StrCat(path, ": not a result"));
  }
  *end = std::max(*end, absl::FromUnixNanos(nanos));
  for (double latency; in >> latency;) run->latencies.push_back(latency);
  return absl::OkStatus();
}

// Polls the children (and runs `during`) until `done` holds; an error
// when a child exits first with a failure, or `until` passes.
absl::Status AwaitChildren(Supervisor& children,
                           const std::function<bool()>& done,
                           const std::function<void()>& during,
                           absl::Time until) {
  while (!done()) {
    for (int i : children.Poll(absl::Milliseconds(20))) {
      const ChildInfo& child = children.child(i);
      if (child.wait_status != 0) {
        return absl::UnavailableError(absl::StrCat(
            child.name, " ", Supervisor::DescribeExit(child.wait_status), ": ",
            child.last_line));
      }
    }
    if (during) during();
    if (absl::Now() > until) {
      return absl::DeadlineExceededError("the bench's workers did not finish");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TransportResult> RunWorkerProcesses(
    const std::string& job_path, const JobConfig& config,
    const std::vector<std::string>& addresses, Mode mode,
    const TransportOptions& o, const std::function<void()>& during) {
  const int workers = config.num_workers;
  const CellFiles files{o.dir, std::filesystem::path(job_path).stem().string()};
  std::remove(files.start().c_str());
  Supervisor children;
  for (int rank = 0; rank < workers; ++rank) {
    std::remove(files.ready(rank).c_str());
    std::remove(files.result(rank).c_str());
    std::vector<std::string> command = {
        o.bench_binary, "--bench_worker",
        "--job",        job_path,
        "--rank",       absl::StrCat(rank),
        "--servers",    absl::StrJoin(addresses, ","),
        "--mode",       ModeName(mode),
        "--seconds",    absl::StrCat(o.seconds),
        "--dir",        files.dir,
        "--tag",        files.tag};
    if (!o.shared_memory) command.push_back("--socket_only");
    RETURN_IF_ERROR(children
                        .Spawn(absl::StrCat("worker ", rank),
                               o.worker_hosts.Launch(rank, command))
                        .status());
  }
  auto all_exist = [&](auto name) {
    for (int rank = 0; rank < workers; ++rank) {
      if (!std::filesystem::exists(name(rank))) return false;
    }
    return true;
  };
  RETURN_IF_ERROR(AwaitChildren(
      children,
      [&] { return all_exist([&](int r) { return files.ready(r); }); }, during,
      absl::Now() + kWarmUp));
  const absl::Time start = absl::Now() + absl::Milliseconds(20);
  WriteWhole(files.start(), absl::StrCat(absl::ToUnixNanos(start), "\n"));
  RETURN_IF_ERROR(AwaitChildren(
      children,
      [&] { return all_exist([&](int r) { return files.result(r); }); }, during,
      start + absl::Seconds(o.seconds) + kWarmUp));
  std::vector<WorkerRun> runs(workers);
  std::vector<std::string> hosts(workers);
  absl::Time end = start;
  for (int rank = 0; rank < workers; ++rank) {
    runs[rank].status =
        ReadResult(files.result(rank), &runs[rank], &end, &hosts[rank]);
  }
  ASSIGN_OR_RETURN(
      TransportResult result,
      Summarize(runs, config, mode, absl::ToDoubleSeconds(end - start)));
  result.worker_hosts = std::move(hosts);
  return result;
}

std::vector<std::string> BenchWorkerFlags() {
  return {"job", "rank", "servers", "mode", "dir", "tag"};
}

int BenchWorkerMain(const ParsedFlags& flags) {
  const CellFiles files{flags.Get("dir", ""), flags.Get("tag", "")};
  absl::StatusOr<int> rank = flags.GetInt("rank", -1);
  double seconds = 0;
  absl::StatusOr<std::vector<Mode>> mode = ParseModes(flags.Get("mode", ""));
  if (files.dir.empty() || files.tag.empty() || !rank.ok() || *rank < 0 ||
      !absl::SimpleAtod(flags.Get("seconds", ""), &seconds) || !mode.ok() ||
      mode->size() != 1) {
    std::fprintf(stderr,
                 "paramd-bench --bench_worker: needs --job, --rank, "
                 "--servers, --mode, --seconds, --dir and --tag\n");
    return 2;
  }
  auto run = [&](WorkerRun* out) -> absl::StatusOr<absl::Time> {
    ASSIGN_OR_RETURN(JobConfig config, LoadJobConfig(flags.Get("job", "")));
    config.worker.shared_memory = !flags.Has("socket_only");
    const ModelSpec spec = BuildModelSpec(config.model);
    ASSIGN_OR_RETURN(
        PartitionPlan plan,
        PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards()));
    const FlatLayout layout(spec);
    const std::vector<std::string> servers =
        absl::StrSplit(flags.Get("servers", ""), ',', absl::SkipEmpty());
    ProcessGate gate(files, *rank, seconds);
    RunWorker(ClientSetup{&config, &plan, &layout, *rank}, servers, {},
              (*mode)[0], gate, *out);
    RETURN_IF_ERROR(out->status);
    if (!gate.started()) {
      return absl::DeadlineExceededError(
          absl::StrCat("no start time from the bench within ",
                       absl::FormatDuration(kWarmUp)));
    }
    return absl::Now();
  };
  WorkerRun out;
  absl::StatusOr<absl::Time> end = run(&out);
  std::ostringstream text;
  if (end.ok()) {
    char host[256] = "?";
    gethostname(host, sizeof(host) - 1);
    text << "ok " << absl::ToUnixNanos(*end) << " " << host << "\n";
    for (double latency : out.latencies) text << latency << "\n";
  } else {
    text << "error rank " << *rank << ": " << end.status().message() << "\n";
  }
  WriteWhole(files.result(*rank), text.str());
  return 0;
}

}  // namespace paramd
