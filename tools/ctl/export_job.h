// paramctl export --job J --out DIR [--since N|newest]: the job's model,
// read from every shard (proto StatusService.Export, page by page), and
// written as the next export in DIR (tools/serve/model_export.h): whole,
// or with --since only what changed since export N of DIR (each shard's
// rows changed since its version in that export; dense tensors whole).
#ifndef PARAMD_TOOLS_CTL_EXPORT_JOB_H_
#define PARAMD_TOOLS_CTL_EXPORT_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/config/job_config.h"
#include "common/rpc/credentials.h"
#include "server/checkpoint/file_system.h"

namespace paramd {

struct ExportOptions {
  std::vector<std::string> addresses;  // Shard k at addresses[k].
  JobSecurity security;
  std::string out;  // The exports' folder.
  bool incremental = false;
  uint64_t since = 0;  // With incremental: 0 for DIR's newest export.
  absl::Duration timeout = absl::Seconds(120);  // Each call.
  uint32_t page_rows = 0;                       // 0: the servers' default.
};

struct ExportSummary {
  std::string manifest;
  uint64_t sequence = 0;
  uint64_t base = 0;
  std::vector<uint64_t> versions;  // By shard.
  uint64_t rows = 0, dropped = 0, tensor_values = 0;
  // Where the time went: reading every shard's pages, putting each
  // table's rows in id order, writing the files (fsync included).
  double read_seconds = 0, order_seconds = 0, write_seconds = 0;
};

// Exports `config`'s model from its servers into options.out.
absl::StatusOr<ExportSummary> ExportJob(const JobConfig& config,
                                        const ExportOptions& options,
                                        FileSystem* fs);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_EXPORT_JOB_H_
