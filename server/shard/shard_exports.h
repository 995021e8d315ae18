// ShardExports: one shard's exports for serving (StatusService.Export,
// paramctl export): the export it holds, handed out page by page, and the
// versions of its last kRemembered exports with the table clocks they
// were at, so that an incremental export can ask for the rows changed
// since one. The first export turns on the tables' change tracking
// (RowTable::TrackChanges: 24 bytes a row unless eviction or incremental
// checkpoints keep it already), and the store keeps the ids of rows
// dropped since the oldest export remembered. Thread-safe.
#ifndef PARAMD_SERVER_SHARD_SHARD_EXPORTS_H_
#define PARAMD_SERVER_SHARD_SHARD_EXPORTS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "proto/paramd.pb.h"
#include "server/store/shard_store.h"

namespace paramd {

class ShardExports {
 public:
  static constexpr size_t kRemembered = 8;
  static constexpr uint32_t kDefaultPageRows = 65536;
  static constexpr uint32_t kMaxPageRows = 1 << 20;
  // Pages hold fewer rows than asked where more would pass this.
  static constexpr size_t kPageBytes = 16 << 20;
  // An export idle this long is dropped at the next call.
  static constexpr absl::Duration kIdle = absl::Minutes(10);

  // `store` and `clock` outlive this object.
  ShardExports(std::string job_id, ShardStore* store, Clock* clock);

  absl::StatusOr<proto::ExportResponse> Export(
      const proto::ExportRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  // Exports remembered (for status and tests).
  std::vector<uint64_t> remembered_versions() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Held {
    uint64_t id = 0;
    uint64_t pages = 0;
    uint32_t page_rows = 0;
    absl::Time used;
    ShardStore::Exported state;  // Each table's rows sorted by id.
  };
  struct Remembered {
    uint64_t version = 0;
    std::vector<int64_t> table_clocks;
  };

  // Captures a new export (page 0 answered by the caller).
  absl::Status Start(const proto::ExportRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Page `page` of held_ into `out`.
  void FillPage(uint64_t page, proto::ExportResponse* out) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const std::string job_id_;
  ShardStore* const store_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  std::optional<Held> held_ ABSL_GUARDED_BY(mu_);
  std::deque<Remembered> remembered_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_SHARD_EXPORTS_H_
