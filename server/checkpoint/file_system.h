// The file operations a checkpoint needs, behind an interface so that
// tests can fail any of them (a full disk, a torn write, a failed rename).
#ifndef PARAMD_SERVER_CHECKPOINT_FILE_SYSTEM_H_
#define PARAMD_SERVER_CHECKPOINT_FILE_SYSTEM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paramd {

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates the folder and its parents when missing.
  virtual absl::Status MakeDirs(const std::string& dir) = 0;
  // Creates or truncates `path`, writes `data` whole and fsyncs it.
  virtual absl::Status WriteFileSynced(const std::string& path,
                                       absl::string_view data) = 0;
  // Renames atomically (within one folder).
  virtual absl::Status Rename(const std::string& from,
                              const std::string& to) = 0;
  // Fsyncs the folder, making renames and removals in it durable.
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;
  // The names (not paths) of the plain files in `dir`.
  virtual absl::StatusOr<std::vector<std::string>> List(
      const std::string& dir) = 0;
  virtual absl::Status Remove(const std::string& path) = 0;
};

// The machine's file system (POSIX calls; errors carry errno's text).
FileSystem* LocalFileSystem();

}  // namespace paramd

#endif  // PARAMD_SERVER_CHECKPOINT_FILE_SYSTEM_H_
