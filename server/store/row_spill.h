// RowSpill: an embedding table's rows kept on the server's disk, in RocksDB
// (Debian's librocksdb-dev), for tables larger than the memory given them
// (model.embeddings[i].storage; docs/sparse-tables.md, "Rows beyond
// memory"). A row is stored whole, as a save holds it (row_changes.h): its
// values and optimizer slots (`stride` floats) and its RowMeta (last
// update, count), under its id in big-endian order, so a scan reads rows
// in ascending id.
//
// Durability is the checkpoints' job, not the spill's: writes skip
// RocksDB's log, a spill is opened empty (whatever a previous process left
// there is not this job's state any more) or from a checkpoint's Snapshot
// (OpenFrom), its files are removed when it closes, and Snapshot copies a
// consistent view for a checkpoint while writes go on. Memory is bounded:
// one memtable of `write_buffer_bytes` and a block cache that also holds
// the index and Bloom filter blocks (so 10^8 rows' filters do not sit in
// memory beside it).
//
// Thread-safe (RocksDB's own locking); the table's lock orders a row's
// moves between memory and the spill.
#ifndef PARAMD_SERVER_STORE_ROW_SPILL_H_
#define PARAMD_SERVER_STORE_ROW_SPILL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/store/row_eviction.h"

namespace rocksdb {
class Cache;
class DB;
}  // namespace rocksdb

namespace paramd {

class RowSpill {
 public:
  struct Options {
    size_t stride = 0;                   // Floats per row, >= 1.
    uint64_t cache_bytes = 64ull << 20;  // Blocks, index, filters.
    uint64_t write_buffer_bytes = 32ull << 20;
  };
  // Opens an empty spill in `dir` (made if missing; a spill left there is
  // removed first). Errors name the folder and what RocksDB said.
  static absl::StatusOr<std::unique_ptr<RowSpill>> Open(const std::string& dir,
                                                        const Options& options);
  // Opens a spill in `dir` holding what the Snapshot in `snapshot` holds
  // (its table files hard-linked where the file system allows, else
  // copied; the snapshot is not changed). NotFound when there is none.
  static absl::StatusOr<std::unique_ptr<RowSpill>> OpenFrom(
      const std::string& snapshot, const std::string& dir,
      const Options& options);
  ~RowSpill();  // Removes the spill's files and folder.
  RowSpill(const RowSpill&) = delete;
  RowSpill& operator=(const RowSpill&) = delete;

  size_t stride() const { return stride_; }
  const std::string& dir() const { return dir_; }

  // Writes rows `ids` (any order, distinct): rows[i * stride, ...) and
  // meta[i] (its id field is not read), replacing any held. One batch:
  // all of them or, on error, none.
  absl::Status Put(absl::Span<const uint64_t> ids, const float* rows,
                   absl::Span<const RowMeta> meta);
  // Reads rows `ids` into out[i * stride, ...) and meta[i]; found[i] says
  // whether the spill holds it (rows not held are left as they were).
  absl::Status Get(absl::Span<const uint64_t> ids, float* out,
                   absl::Span<RowMeta> meta, std::vector<bool>* found) const;
  // Removes rows `ids` (those not held are no error), in one batch.
  absl::Status Remove(absl::Span<const uint64_t> ids);
  // Calls f(id, row, meta) for every row, in ascending id, on a consistent
  // view: writes meanwhile are not seen. DataLoss when a stored row is not
  // of this spill's stride.
  absl::Status ForEach(const std::function<void(uint64_t, const float*,
                                                const RowMeta&)>& f) const;
  // A copy of the spill now in `dir` (which must not exist; hard links to
  // its files where the file system allows): what a checkpoint keeps of a
  // spilled table. Writes may go on meanwhile.
  absl::Status Snapshot(const std::string& dir) const;
  // Calls f as ForEach does for every row of the Snapshot in `dir`, a
  // spill of `stride` (opened read-only; NotFound when there is none).
  static absl::Status ReadSnapshot(
      const std::string& dir, size_t stride,
      const std::function<void(uint64_t, const float*, const RowMeta&)>& f);
  // Writes what the write buffers hold into files and waits for it
  // (RocksDB flushes on its own as the buffers fill, in the background).
  absl::Status Flush();
  // RocksDB's estimate of the rows held, and the bytes of its files (not
  // counting rows still in the write buffers).
  uint64_t EstimatedRows() const;
  uint64_t DiskBytes() const;

 private:
  RowSpill(std::string dir, size_t stride);

  const std::string dir_;
  const size_t stride_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STORE_ROW_SPILL_H_
