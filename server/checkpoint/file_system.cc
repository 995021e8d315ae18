#include "server/checkpoint/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int e = errno;
  const std::string text = absl::StrCat(what, " '", path, "': ", strerror(e));
  return e == ENOSPC || e == EDQUOT ? absl::ResourceExhaustedError(text)
         : e == ENOENT              ? absl::NotFoundError(text)
                                    : absl::UnavailableError(text);
}

class PosixFileSystem final : public FileSystem {
 public:
  absl::Status MakeDirs(const std::string& dir) override {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) {
      return absl::UnavailableError(
          absl::StrCat("cannot create '", dir, "': ", error.message()));
    }
    return absl::OkStatus();
  }

  absl::Status WriteFileSynced(const std::string& path,
                               absl::string_view data) override {
    const int fd =
        open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Errno("cannot create", path);
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = write(fd, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        absl::Status s = Errno("cannot write", path);
        close(fd);
        return s;
      }
      done += static_cast<size_t>(n);
    }
    if (fsync(fd) != 0) {
      absl::Status s = Errno("cannot fsync", path);
      close(fd);
      return s;
    }
    if (close(fd) != 0) return Errno("cannot close", path);
    return absl::OkStatus();
  }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (rename(from.c_str(), to.c_str()) != 0) {
      return Errno(absl::StrCat("cannot rename '", from, "' to"), to);
    }
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("cannot open the folder", dir);
    const int r = fsync(fd);
    absl::Status s = r == 0 ? absl::OkStatus() : Errno("cannot fsync", dir);
    close(fd);
    return s;
  }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("cannot open", path);
    std::string out;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      out.reserve(static_cast<size_t>(st.st_size));
    }
    char buffer[1 << 16];
    while (true) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        absl::Status s = Errno("cannot read", path);
        close(fd);
        return s;
      }
      if (n == 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    close(fd);
    return out;
  }

  absl::StatusOr<std::vector<std::string>> List(
      const std::string& dir) override {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return Errno("cannot list", dir);
    std::vector<std::string> names;
    while (const dirent* e = readdir(d)) {
      if (e->d_type == DT_REG || e->d_type == DT_UNKNOWN) {
        names.push_back(e->d_name);
      }
    }
    closedir(d);
    return names;
  }

  absl::Status Remove(const std::string& path) override {
    if (unlink(path.c_str()) != 0) return Errno("cannot remove", path);
    return absl::OkStatus();
  }
};

}  // namespace

FileSystem* LocalFileSystem() {
  static PosixFileSystem* fs = new PosixFileSystem();
  return fs;
}

}  // namespace paramd
