#include "common/daemon_start.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/job_file.h"
#include "common/logging.h"
#include "common/process_setup.h"

namespace paramd {
namespace {

std::nullopt_t Fail(const char* program, const absl::Status& status,
                    const char* usage, int code, int* exit_code) {
  std::fprintf(stderr, "%s: %s\n", program,
               std::string(status.message()).c_str());
  if (usage != nullptr) std::fprintf(stderr, "%s\n", usage);
  *exit_code = code;
  return std::nullopt;
}

}  // namespace

std::optional<DaemonStart> StartDaemon(const DaemonSpec& spec, int argc,
                                       char** argv, int* exit_code) {
  SetUpProcess();
  std::set<std::string> valued = spec.flags;
  valued.insert({"job", spec.id_flag, "log_level"});
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv, valued, spec.switches);
  if (!flags.ok())
    return Fail(spec.program, flags.status(), spec.usage, 2, exit_code);
  if (!flags->Has("job") || !flags->Has(spec.id_flag)) {
    return Fail(spec.program,
                absl::InvalidArgumentError(absl::StrCat(
                    "--job and --", spec.id_flag, " are required")),
                spec.usage, 2, exit_code);
  }
  DaemonStart start;
  absl::StatusOr<int> id = flags->GetInt(spec.id_flag, -1);
  if (!id.ok()) return Fail(spec.program, id.status(), nullptr, 2, exit_code);
  if (absl::Status s =
          InitLogging(spec.program, flags->Get("log_level", "info"));
      !s.ok()) {
    return Fail(spec.program, s, nullptr, 2, exit_code);
  }
  absl::StatusOr<JobConfig> config = LoadJobConfig(flags->Get("job", ""));
  if (!config.ok()) {
    return Fail(spec.program, config.status(), nullptr, 1, exit_code);
  }
  start.flags = *std::move(flags);
  start.config = *std::move(config);
  start.id = *id;
  return start;
}

}  // namespace paramd
