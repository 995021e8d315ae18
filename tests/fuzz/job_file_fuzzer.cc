// libFuzzer target: the job-file parser on any text. It must answer every
// input with a config or an error naming file, line and field; nothing may
// crash, hang or escape as an exception.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/config/job_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<paramd::JobConfig> config =
      paramd::ParseJobConfig(text, "/fuzz/job.yaml");
  if (!config.ok() &&
      config.status().message().rfind("/fuzz/job.yaml:", 0) != 0) {
    std::fprintf(stderr, "an error that does not name the file: %s\n",
                 std::string(config.status().message()).c_str());
    std::abort();
  }
  return 0;
}
