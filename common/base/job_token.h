// The job token: a shared secret every call to a job's servers carries
// (security.token_file). Read from its file, compared in constant time,
// generated from the OS's random source. It never appears in an error, a
// log line or the status RPC.
#ifndef PARAMD_COMMON_BASE_JOB_TOKEN_H_
#define PARAMD_COMMON_BASE_JOB_TOKEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paramd {

// Tokens are 16 to 4096 printable, non-space ASCII characters (what a gRPC
// metadata value may carry).
inline constexpr size_t kMinTokenLength = 16;
inline constexpr size_t kMaxTokenLength = 4096;

// The token in `path` (trailing whitespace dropped). Errors name
// security.token_file and the path, never the contents.
absl::StatusOr<std::string> ReadJobToken(const std::string& path);

// Whether `given` equals `expected`, in time that depends only on
// expected's length.
bool JobTokensEqual(absl::string_view expected, absl::string_view given);

// 64 hex digits from /dev/urandom.
absl::StatusOr<std::string> GenerateJobToken();

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_JOB_TOKEN_H_
