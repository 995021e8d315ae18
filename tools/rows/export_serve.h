// rows_bench --export DIR: the trained model exported from the job's
// servers (paramctl export's code) and served (paramd-serve's), timed.
#ifndef PARAMD_TOOLS_ROWS_EXPORT_SERVE_H_
#define PARAMD_TOOLS_ROWS_EXPORT_SERVE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/config/job_config.h"

namespace paramd {

// Exports the model of `config` from the servers at `addresses` into `dir`
// (whole), loads it as paramd-serve does and looks up 100,000 random ids
// of table 0; prints the times.
absl::Status ExportAndServe(const JobConfig& config,
                            const std::vector<std::string>& addresses,
                            const std::string& dir);

}  // namespace paramd

#endif  // PARAMD_TOOLS_ROWS_EXPORT_SERVE_H_
