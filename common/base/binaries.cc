#include "common/base/binaries.h"

#include <unistd.h>

#include <filesystem>

namespace paramd {

std::string FindBinary(const std::string& name, const std::string& package,
                       int access_mode) {
  std::error_code ec;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path dir = self.parent_path();
  for (const auto& candidate :
       {dir / name, dir.parent_path() / package / name}) {
    if (access(candidate.c_str(), access_mode) == 0) return candidate.string();
  }
  return (dir.parent_path() / package / name).string();
}

}  // namespace paramd
