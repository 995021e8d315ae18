#include "common/wire/shared_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace paramd {
namespace {

constexpr char kPrefix[] = "paramd-";
constexpr char kMagic[8] = {'P', 'D', 'S', 'H', 'M', '0', '1', '\0'};
constexpr size_t kAlign = 64;
constexpr uint64_t kMaxBytes = uint64_t{4} << 30;

struct Header {
  char magic[8];
  uint64_t push_offset, push_bytes, pull_offset, pull_bytes;
  uint64_t pid;
  uint64_t reserved[2];
};
static_assert(sizeof(Header) == kAlign, "the header fills one 64-byte line");

size_t RoundUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

std::string PathOf(absl::string_view name) {
  return absl::StrCat(SharedSegment::Directory(), "/", name);
}

// "paramd-<pid>-<16 hex digits>": the pid, or 0 when `name` is not one.
int64_t PidOfName(absl::string_view name) {
  if (!absl::StartsWith(name, kPrefix)) return 0;
  name.remove_prefix(sizeof(kPrefix) - 1);
  const size_t dash = name.find('-');
  if (dash == absl::string_view::npos || name.size() - dash - 1 != 16) {
    return 0;
  }
  int64_t pid = 0;
  if (!absl::SimpleAtoi(name.substr(0, dash), &pid) || pid <= 0) return 0;
  for (char c : name.substr(dash + 1)) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return 0;
  }
  return pid;
}

// Removes this user's segments whose creator is gone (a worker that was
// killed cannot remove its own).
void SweepStale() {
  DIR* dir = opendir(SharedSegment::Directory());
  if (dir == nullptr) return;
  while (const dirent* e = readdir(dir)) {
    const int64_t pid = PidOfName(e->d_name);
    if (pid == 0) continue;  // Not a segment.
    // Alive (EPERM: another user's live process): keep it.
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    const std::string path = PathOf(e->d_name);
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_uid == geteuid()) {
      unlink(path.c_str());
    }
  }
  closedir(dir);
}

absl::Status Refuse(absl::string_view name, absl::string_view why) {
  return absl::FailedPreconditionError(
      absl::StrCat("shared memory segment '", name, "': ", why));
}

}  // namespace

const char* SharedSegment::Directory() { return "/dev/shm"; }

SharedSegment::SharedSegment(std::string name, char* base, size_t size,
                             bool owner)
    : name_(std::move(name)), base_(base), size_(size), owner_(owner) {
  Header h;
  std::memcpy(&h, base_, sizeof(h));
  push_ = absl::MakeSpan(base_ + h.push_offset, h.push_bytes);
  pull_ = absl::MakeSpan(base_ + h.pull_offset, h.pull_bytes);
}

SharedSegment::~SharedSegment() {
  munmap(base_, size_);
  if (owner_) unlink(PathOf(name_).c_str());
}

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Create(
    size_t push_bytes, size_t pull_bytes) {
  SweepStale();
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.push_offset = kAlign;
  h.push_bytes = RoundUp(push_bytes);
  h.pull_offset = h.push_offset + h.push_bytes;
  h.pull_bytes = RoundUp(pull_bytes);
  h.pid = static_cast<uint64_t>(getpid());
  const uint64_t size = h.pull_offset + h.pull_bytes;
  if (size > kMaxBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a shared memory segment of ", size, " bytes"));
  }
  std::random_device random;
  const uint64_t nonce = (uint64_t{random()} << 32) ^ random();
  const std::string name =
      absl::StrFormat("%s%d-%016x", kPrefix, getpid(), nonce);
  const std::string path = PathOf(name);
  const int fd = open(path.c_str(),
                      O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  // The pages are reserved now (not an ftruncate's holes): a /dev/shm too
  // small for the segment (a container's 64 MB) refuses it here, instead
  // of a SIGBUS at the first write past what it holds.
  void* base = MAP_FAILED;
  int error = posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (error == 0) {
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) error = errno;
  }
  close(fd);
  if (base == MAP_FAILED) {
    unlink(path.c_str());
    return absl::UnavailableError(absl::StrCat(
        "cannot make ", path, " of ", size, " bytes: ", std::strerror(error)));
  }
  // Touched once now, not on a step's path (a fresh page's first touch
  // costs a fault each).
  std::memset(base, 0, size);
  std::memcpy(base, &h, sizeof(h));
  return std::unique_ptr<SharedSegment>(
      new SharedSegment(name, static_cast<char*>(base), size, true));
}

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Attach(
    absl::string_view name) {
  if (PidOfName(name) == 0) {
    return Refuse(name, "not a segment's name (paramd-<pid>-<16 hex digits>)");
  }
  const std::string path = PathOf(name);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    return Refuse(name,
                  absl::StrCat("cannot open ", path, " (", std::strerror(errno),
                               "): is the worker on another host?"));
  }
  struct stat st;
  void* base = MAP_FAILED;
  std::string why;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (st.st_uid != geteuid()) {
    why = "owned by another user";
  } else if (st.st_size < static_cast<off_t>(sizeof(Header)) ||
             static_cast<uint64_t>(st.st_size) > kMaxBytes) {
    why = absl::StrCat("a size of ", st.st_size, " bytes");
  } else {
    base = mmap(nullptr, static_cast<size_t>(st.st_size),
                PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      why = absl::StrCat("cannot map it: ", std::strerror(errno));
    }
  }
  close(fd);
  if (base == MAP_FAILED) return Refuse(name, why);
  const size_t size = static_cast<size_t>(st.st_size);
  Header h;
  std::memcpy(&h, base, sizeof(h));
  const bool consistent =
      std::memcmp(h.magic, kMagic, sizeof(kMagic)) == 0 &&
      h.push_offset >= sizeof(Header) && h.push_offset % kAlign == 0 &&
      h.pull_offset % kAlign == 0 && h.push_bytes <= size &&
      h.push_offset <= size - h.push_bytes && h.pull_bytes <= size &&
      h.pull_offset <= size - h.pull_bytes &&
      (h.push_offset + h.push_bytes <= h.pull_offset ||
       h.pull_offset + h.pull_bytes <= h.push_offset);
  if (!consistent) {
    munmap(base, size);
    return Refuse(name, "its header does not describe its areas");
  }
  return std::unique_ptr<SharedSegment>(new SharedSegment(
      std::string(name), static_cast<char*>(base), size, false));
}

}  // namespace paramd
