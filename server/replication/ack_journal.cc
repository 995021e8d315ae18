#include "server/replication/ack_journal.h"

#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace paramd {

absl::StatusOr<std::unique_ptr<AckJournal>> AckJournal::Open(
    const std::string& path, int shard) {
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ack_log ", path, ": cannot open it: ", std::strerror(errno)));
  }
  return std::unique_ptr<AckJournal>(new AckJournal(file, shard));
}

AckJournal::~AckJournal() {
  absl::MutexLock lock(&mu_);
  std::fclose(file_);
}

void AckJournal::Record(uint64_t term, uint64_t version) {
  const int64_t now = absl::ToUnixNanos(absl::Now());
  absl::MutexLock lock(&mu_);
  std::fprintf(file_, "%" PRId64 " %d %" PRIu64 " %" PRIu64 "\n", now, shard_,
               term, version);
  std::fflush(file_);
}

}  // namespace paramd
