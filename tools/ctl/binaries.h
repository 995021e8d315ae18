// Where the tools find paramd's other binaries.
#ifndef PARAMD_TOOLS_CTL_BINARIES_H_
#define PARAMD_TOOLS_CTL_BINARIES_H_

#include <string>

namespace paramd {

// The binary `name` of Bazel package `package`: beside the running
// program, or in Bazel's output layout (bazel-bin/tools/paramctl →
// bazel-bin/server/paramd-server).
std::string FindBinary(const std::string& name, const std::string& package);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_BINARIES_H_
