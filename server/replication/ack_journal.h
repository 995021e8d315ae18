// AckJournal: a file where a replicated shard's server writes down every
// step it acknowledges, with the term it held, for checking after a run
// that no two servers acknowledged the shard's steps at one moment
// (paramd-server --ack_log; tests/cluster/partition_test.cc reads them).
//
// One line per step, written and flushed to the kernel before the step is
// acknowledged (so a SIGKILL loses none):
//   UNIX_NANOS SHARD TERM VERSION
// UNIX_NANOS is the wall clock's: servers on one machine (or on hosts with
// synchronized clocks) write comparable times. Thread-safe.
#ifndef PARAMD_SERVER_REPLICATION_ACK_JOURNAL_H_
#define PARAMD_SERVER_REPLICATION_ACK_JOURNAL_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace paramd {

class AckJournal {
 public:
  // Appends to `path` (made when missing); INVALID_ARGUMENT naming it when
  // it cannot be opened.
  static absl::StatusOr<std::unique_ptr<AckJournal>> Open(
      const std::string& path, int shard);
  ~AckJournal();
  AckJournal(const AckJournal&) = delete;
  AckJournal& operator=(const AckJournal&) = delete;

  // Step `version` acknowledged at `term`, now.
  void Record(uint64_t term, uint64_t version) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  AckJournal(std::FILE* file, int shard) : file_(file), shard_(shard) {}

  absl::Mutex mu_;
  std::FILE* const file_ ABSL_PT_GUARDED_BY(mu_);
  const int shard_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_REPLICATION_ACK_JOURNAL_H_
