// Logging set-up for paramd processes (spdlog). Each process calls
// InitLogging once at start; later code logs through spdlog's default
// logger, to stderr, one line per event.
#ifndef PARAMD_COMMON_BASE_LOGGING_H_
#define PARAMD_COMMON_BASE_LOGGING_H_

#include <string>

#include "absl/status/status.h"

namespace paramd {

// `level` is one of trace, debug, info, warn, error, off. An unknown level
// is an error naming it, and leaves logging as it was.
absl::Status InitLogging(const std::string& process_name,
                         const std::string& level);

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_LOGGING_H_
