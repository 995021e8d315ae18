// paramd-worker --job J.yaml --rank R: trains as worker R of the job.
//
// --servers HOST:PORT,... overrides the job's cluster.servers (paramctl
// passes the ports servers bound when the job asks for port 0).
#include <cstdio>
#include <string>

#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "common/job_config.h"
#include "common/job_file.h"
#include "common/logging.h"
#include "common/process_setup.h"
#include "spdlog/spdlog.h"
#include "worker/trainer.h"

namespace paramd {
namespace {

constexpr char kUsage[] =
    "usage: paramd-worker --job J.yaml --rank R [--servers HOST:PORT,...] "
    "[--log_level LEVEL]";

int Run(int argc, char** argv) {
  SetUpProcess();
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv, {"job", "rank", "servers", "log_level"}, {});
  if (!flags.ok()) {
    std::fprintf(stderr, "paramd-worker: %s\n%s\n",
                 std::string(flags.status().message()).c_str(), kUsage);
    return 2;
  }
  if (!flags->Has("job") || !flags->Has("rank")) {
    std::fprintf(stderr, "paramd-worker: --job and --rank are required\n%s\n",
                 kUsage);
    return 2;
  }
  absl::StatusOr<int> rank = flags->GetInt("rank", -1);
  absl::Status log_status =
      InitLogging("paramd-worker", flags->Get("log_level", "info"));
  if (!rank.ok() || !log_status.ok()) {
    std::fprintf(stderr, "paramd-worker: %s\n",
                 std::string((rank.ok() ? log_status : rank.status()).message())
                     .c_str());
    return 2;
  }
  absl::StatusOr<JobConfig> config = LoadJobConfig(flags->Get("job", ""));
  if (!config.ok()) {
    std::fprintf(stderr, "paramd-worker: %s\n",
                 std::string(config.status().message()).c_str());
    return 1;
  }
  TrainerOptions options;
  if (flags->Has("servers")) {
    options.servers =
        absl::StrSplit(flags->Get("servers", ""), ',', absl::SkipEmpty());
  }
  absl::StatusOr<std::unique_ptr<Trainer>> trainer =
      Trainer::Create(*config, *rank, std::move(options));
  if (!trainer.ok()) {
    std::fprintf(stderr, "paramd-worker: rank %d: %s\n", *rank,
                 std::string(trainer.status().message()).c_str());
    return 1;
  }
  if (absl::Status s = (*trainer)->Run(); !s.ok()) {
    spdlog::error("rank {}: {}", *rank, s.ToString());
    return 1;
  }
  spdlog::info("rank {}: finished {} epochs", *rank, config->training.epochs);
  return 0;
}

}  // namespace
}  // namespace paramd

int main(int argc, char** argv) { return paramd::Run(argc, argv); }
