// Where a paramd program finds the project's other binaries and plugins:
// beside itself, or in Bazel's output layout (bazel-bin/<package>/).
#ifndef PARAMD_COMMON_BASE_BINARIES_H_
#define PARAMD_COMMON_BASE_BINARIES_H_

#include <unistd.h>

#include <string>

namespace paramd {

// The file `name` (a binary, or a plugin such as libparamd_cuda.so) of
// Bazel package `package`: beside the running program, or in Bazel's output
// layout (bazel-bin/tools/paramctl → bazel-bin/server/paramd-server). The
// file must allow `access_mode` (access(2): X_OK for a binary, R_OK for a
// plugin, which packages install without the x bit). When neither place
// has it, the Bazel-layout path.
std::string FindBinary(const std::string& name, const std::string& package,
                       int access_mode = X_OK);

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_BINARIES_H_
