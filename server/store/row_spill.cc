#include "server/store/row_spill.h"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

// An id as a key: big-endian, so the keys' byte order is the ids' order.
std::string Key(uint64_t id) {
  std::string key(8, '\0');
  for (int i = 0; i < 8; ++i) key[i] = static_cast<char>(id >> (56 - 8 * i));
  return key;
}

uint64_t IdOf(const rocksdb::Slice& key) {
  uint64_t id = 0;
  for (size_t i = 0; i < 8; ++i) {
    id = (id << 8) | static_cast<unsigned char>(key.data()[i]);
  }
  return id;
}

absl::Status Named(const std::string& dir, const char* what,
                   const rocksdb::Status& s) {
  if (s.ok()) return absl::OkStatus();
  const std::string message =
      absl::StrCat("row spill ", dir, ": ", what, ": ", s.ToString());
  if (s.IsNotFound() || s.IsPathNotFound()) {
    return absl::NotFoundError(message);
  }
  return absl::InternalError(message);
}

// Every row of `db` as RowSpill::ForEach gives them, on a snapshot.
absl::Status Scan(
    rocksdb::DB* db, const std::string& dir, size_t stride,
    const std::function<void(uint64_t, const float*, const RowMeta&)>& f) {
  rocksdb::ReadOptions read;
  read.snapshot = db->GetSnapshot();
  read.fill_cache = false;  // A scan would evict the hot blocks.
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(read));
  const size_t bytes = stride * sizeof(float);
  std::vector<float> row(stride);
  absl::Status status;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key(), value = it->value();
    if (key.size() != 8 ||
        value.size() != bytes + sizeof(int64_t) + sizeof(uint32_t)) {
      status = absl::DataLossError(absl::StrCat(
          "row spill ", dir, ": an entry of ", key.size(), "+", value.size(),
          " bytes, not 8+", bytes + sizeof(int64_t) + sizeof(uint32_t)));
      break;
    }
    RowMeta meta;
    meta.id = IdOf(key);
    std::memcpy(row.data(), value.data(), bytes);
    std::memcpy(&meta.last, value.data() + bytes, sizeof(int64_t));
    std::memcpy(&meta.count, value.data() + bytes + sizeof(int64_t),
                sizeof(uint32_t));
    f(meta.id, row.data(), meta);
  }
  if (status.ok()) status = Named(dir, "scan", it->status());
  it.reset();
  db->ReleaseSnapshot(read.snapshot);
  return status;
}

// Fills the empty folder `dir` with the spill Snapshot `snapshot` holds:
// its table files (never written again) hard-linked, or copied where a
// link cannot be made; the others (the manifest, which the spill appends
// to, and the small files beside it) copied.
absl::Status CopySnapshot(const std::string& snapshot, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code e;
  if (!fs::exists(fs::path(snapshot) / "CURRENT", e)) {
    return absl::NotFoundError(
        absl::StrCat("row spill snapshot ", snapshot, ": not found"));
  }
  fs::remove_all(dir, e);
  fs::create_directories(dir, e);
  for (fs::directory_iterator it(snapshot, e), end; !e && it != end;
       it.increment(e)) {
    const fs::path to = fs::path(dir) / it->path().filename();
    if (it->path().extension() == ".sst") {
      fs::create_hard_link(it->path(), to, e);
      if (!e) continue;
      e.clear();
    }
    fs::copy_file(it->path(), to, e);
    if (e) break;
  }
  if (e) {
    return absl::InternalError(absl::StrCat("row spill ", dir, ": copy ",
                                            snapshot, ": ", e.message()));
  }
  return absl::OkStatus();
}

}  // namespace

RowSpill::RowSpill(std::string dir, size_t stride)
    : dir_(std::move(dir)), stride_(stride) {}

RowSpill::~RowSpill() {
  if (db_ == nullptr) return;
  db_.reset();
  rocksdb::Options o;
  (void)rocksdb::DestroyDB(dir_, o);
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

absl::StatusOr<std::unique_ptr<RowSpill>> RowSpill::Open(
    const std::string& dir, const Options& options) {
  return OpenFrom("", dir, options);
}

absl::StatusOr<std::unique_ptr<RowSpill>> RowSpill::OpenFrom(
    const std::string& snapshot, const std::string& dir,
    const Options& options) {
  if (options.stride < 1 || dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("row spill: a folder and a stride >= 1 (got '", dir, "', ",
                     options.stride, ")"));
  }
  std::unique_ptr<RowSpill> spill(new RowSpill(dir, options.stride));
  rocksdb::Options o;
  o.create_if_missing = snapshot.empty();
  o.error_if_exists = snapshot.empty();
  o.write_buffer_size = options.write_buffer_bytes;
  o.max_write_buffer_number = 2;
  // Most reads ask for rows never written (a table's new ids): a Bloom
  // filter over the write buffer's keys answers those without searching
  // its skip list.
  o.memtable_whole_key_filtering = true;
  o.memtable_prefix_bloom_size_ratio = 0.05;
  o.compression = rocksdb::kNoCompression;  // Floats hardly compress.
  rocksdb::BlockBasedTableOptions table;
  // The files' index and Bloom filters live in the block cache, in
  // partitions of 4 KiB behind a small top level that stays pinned: at
  // 10^8 rows a server's filters and index are over 100 MiB, more than
  // its cache, and a lookup then loads the partitions it needs, not a
  // file's whole filter. Half the cache is kept for them.
  spill->cache_ = rocksdb::NewLRUCache(options.cache_bytes, -1, false, 0.5);
  table.block_cache = spill->cache_;
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.pin_top_level_index_and_filter = true;
  table.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  table.partition_filters = true;
  table.metadata_block_size = 4096;
  table.optimize_filters_for_memory = true;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  // A spill left by an earlier process is not this one's state.
  if (absl::Status s =
          Named(dir, "remove the old spill", rocksdb::DestroyDB(dir, o));
      !s.ok()) {
    return s;
  }
  if (!snapshot.empty()) {
    if (absl::Status s = CopySnapshot(snapshot, dir); !s.ok()) return s;
  }
  rocksdb::DB* db = nullptr;
  if (absl::Status s = Named(dir, "open", rocksdb::DB::Open(o, dir, &db));
      !s.ok()) {
    return s;
  }
  spill->db_.reset(db);
  return spill;
}

absl::Status RowSpill::Put(absl::Span<const uint64_t> ids, const float* rows,
                           absl::Span<const RowMeta> meta) {
  if (meta.size() != ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "row spill ", dir_, ": ", ids.size(), " ids, ", meta.size(), " metas"));
  }
  rocksdb::WriteBatch batch;
  std::string value(
      stride_ * sizeof(float) + sizeof(int64_t) + sizeof(uint32_t), '\0');
  // In key order: each insert into the write buffer's skip list starts
  // where the one before ended.
  std::vector<size_t> order(ids.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&ids](size_t a, size_t b) { return ids[a] < ids[b]; });
  for (size_t i : order) {
    char* v = value.data();
    std::memcpy(v, rows + i * stride_, stride_ * sizeof(float));
    v += stride_ * sizeof(float);
    std::memcpy(v, &meta[i].last, sizeof(int64_t));
    std::memcpy(v + sizeof(int64_t), &meta[i].count, sizeof(uint32_t));
    batch.Put(Key(ids[i]), value);
  }
  rocksdb::WriteOptions w;
  w.disableWAL = true;  // The checkpoints are the durable state.
  return Named(dir_, "write", db_->Write(w, &batch));
}

absl::Status RowSpill::Get(absl::Span<const uint64_t> ids, float* out,
                           absl::Span<RowMeta> meta,
                           std::vector<bool>* found) const {
  std::vector<std::string> keys;
  keys.reserve(ids.size());
  for (uint64_t id : ids) keys.push_back(Key(id));
  std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
  // The batched MultiGet: one pass over each file's filter and blocks for
  // all the keys (it sorts them when they are not sorted already).
  std::vector<rocksdb::PinnableSlice> values(ids.size());
  std::vector<rocksdb::Status> got(ids.size());
  db_->MultiGet(rocksdb::ReadOptions(), db_->DefaultColumnFamily(),
                slices.size(), slices.data(), values.data(), got.data(),
                std::is_sorted(ids.begin(), ids.end()));
  found->assign(ids.size(), false);
  const size_t bytes = stride_ * sizeof(float);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (got[i].IsNotFound()) continue;
    if (absl::Status s = Named(dir_, "read", got[i]); !s.ok()) return s;
    if (values[i].size() != bytes + sizeof(int64_t) + sizeof(uint32_t)) {
      return absl::DataLossError(absl::StrCat("row spill ", dir_, ": row ",
                                              ids[i], " has ", values[i].size(),
                                              " bytes"));
    }
    const char* v = values[i].data();
    std::memcpy(out + i * stride_, v, bytes);
    meta[i].id = ids[i];
    std::memcpy(&meta[i].last, v + bytes, sizeof(int64_t));
    std::memcpy(&meta[i].count, v + bytes + sizeof(int64_t), sizeof(uint32_t));
    (*found)[i] = true;
  }
  return absl::OkStatus();
}

absl::Status RowSpill::Remove(absl::Span<const uint64_t> ids) {
  rocksdb::WriteBatch batch;
  for (uint64_t id : ids) batch.Delete(Key(id));
  rocksdb::WriteOptions w;
  w.disableWAL = true;
  return Named(dir_, "remove", db_->Write(w, &batch));
}

absl::Status RowSpill::ForEach(
    const std::function<void(uint64_t, const float*, const RowMeta&)>& f)
    const {
  return Scan(db_.get(), dir_, stride_, f);
}

absl::Status RowSpill::ReadSnapshot(
    const std::string& dir, size_t stride,
    const std::function<void(uint64_t, const float*, const RowMeta&)>& f) {
  rocksdb::Options o;
  o.create_if_missing = false;
  rocksdb::DB* raw = nullptr;
  if (absl::Status s = Named(dir, "open the snapshot",
                             rocksdb::DB::OpenForReadOnly(o, dir, &raw));
      !s.ok()) {
    return s;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  return Scan(db.get(), dir, stride, f);
}

absl::Status RowSpill::Snapshot(const std::string& dir) const {
  rocksdb::Checkpoint* raw = nullptr;
  if (absl::Status s =
          Named(dir_, "snapshot", rocksdb::Checkpoint::Create(db_.get(), &raw));
      !s.ok()) {
    return s;
  }
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // Memtables are flushed into the copy (the log is off).
  return Named(dir_, absl::StrCat("snapshot into ", dir).c_str(),
               checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0));
}

absl::Status RowSpill::Flush() {
  rocksdb::FlushOptions flush;
  flush.wait = true;
  return Named(dir_, "flush", db_->Flush(flush));
}

uint64_t RowSpill::EstimatedRows() const {
  uint64_t n = 0;
  db_->GetIntProperty("rocksdb.estimate-num-keys", &n);
  return n;
}

uint64_t RowSpill::DiskBytes() const {
  uint64_t n = 0;
  db_->GetIntProperty("rocksdb.total-sst-files-size", &n);
  return n;
}

}  // namespace paramd
