#include "server/store/row_table.h"

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/model/rows.h"
#include "server/store/state_bytes.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {

// PRW2 adds the clock and, with eviction, each row's RowMeta; PROW (the
// format before) is still read.
constexpr char kMagic[4] = {'P', 'R', 'W', '2'};
constexpr char kMagicBeforeClock[4] = {'P', 'R', 'O', 'W'};
// A table with storage: its rows are in a disk snapshot.
constexpr char kMagicOnDisk[4] = {'P', 'R', 'W', 'S'};
constexpr size_t kMetaBytes = kRowMetaBytes;

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> MakeRowOptimizer(
    const EmbeddingTableConfig& config) {
  OptimizerConfig c;
  c.type = config.optimizer;
  c.learning_rate = config.learning_rate;
  c.beta1 = config.beta1;
  c.beta2 = config.beta2;
  c.schedule = config.schedule;
  // 0: the optimizer's default (as the job file fills it).
  c.eps = config.eps > 0 ? config.eps : c.type == "adagrad" ? 1e-10 : 1e-8;
  if (c.type != "sgd" && c.type != "adagrad" && c.type != "adam") {
    return absl::InvalidArgumentError(
        absl::StrCat("model.embeddings: table '", config.name,
                     "': unknown optimizer '", c.type, "'"));
  }
  return MakeOptimizer(c);
}

RowTable::RowTable(const EmbeddingTableConfig& config, uint32_t table,
                   uint64_t seed, std::unique_ptr<Optimizer> optimizer)
    : config_(config),
      table_(table),
      seed_(seed),
      optimizer_(std::move(optimizer)),
      stride_(static_cast<size_t>(config.dim) * (1 + optimizer_->num_slots())) {
  if (config.admission.enabled()) {
    admission_ = std::make_unique<RowAdmission>(config.admission, table, seed);
  }
  if (config.storage.enabled()) {
    memory_order_.capacity_rows =
        RowTier::MemoryRows(config.storage.memory_bytes, stride_);
  }
}

absl::Status RowTable::OpenStorage(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<RowTier>> tier = RowTier::Open(dir, stride_);
  if (!tier.ok()) {
    return absl::Status(tier.status().code(),
                        absl::StrCat("model.embeddings: table '", config_.name,
                                     "': ", tier.status().message()));
  }
  absl::MutexLock lock(&mu_);
  tier_ = *std::move(tier);
  return absl::OkStatus();
}

uint64_t RowTable::rows_on_disk() const {
  absl::ReaderMutexLock lock(&mu_);
  return tier_ ? tier_->rows() : 0;
}

uint64_t RowTable::disk_bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return tier_ ? tier_->spill().DiskBytes() : 0;
}

float* RowTable::RowAt(uint32_t slot) {
  return slabs_[slot / kSlabRows].get() + (slot % kSlabRows) * stride_;
}

const float* RowTable::RowAt(uint32_t slot) const {
  return slabs_[slot / kSlabRows].get() + (slot % kSlabRows) * stride_;
}

uint32_t RowTable::AddSlot(uint64_t id) {
  const uint32_t slot = size_++;
  if (slot / kSlabRows >= slabs_.size()) {
    slabs_.push_back(std::make_unique<float[]>(kSlabRows * stride_));
  }
  index_.emplace(id, slot);
  if (keeps_meta()) meta_.push_back(RowMeta{id, clock_, 0});
  return slot;
}

uint32_t RowTable::AddRow(uint64_t id) {
  const uint32_t slot = AddSlot(id);
  float* row = RowAt(slot);
  InitRow(config_, seed_, table_, id, absl::MakeSpan(row, config_.dim));
  std::fill(row + config_.dim, row + stride_, 0.0f);
  return slot;
}

void RowTable::RemoveRow(uint32_t slot, bool dropped) {
  const uint32_t last = size_ - 1;
  if (track_changes_ && dropped) removed_.Add(clock_, meta_[slot].id);
  index_.erase(meta_[slot].id);
  if (slot != last) {
    std::memcpy(RowAt(slot), RowAt(last), stride_ * sizeof(float));
    meta_[slot] = meta_[last];
    index_[meta_[slot].id] = slot;
  }
  meta_.pop_back();
  --size_;
}

std::vector<uint64_t> RowTable::IdsBySlotLocked() const {
  std::vector<uint64_t> ids(size_);
  for (const auto& [id, slot] : index_) ids[slot] = id;
  return ids;
}

void RowTable::ShrinkLocked() {
  const size_t needed = (size_ + kSlabRows - 1) / kSlabRows;
  while (slabs_.size() > needed + 1) slabs_.pop_back();  // One spare.
  if (meta_.capacity() > 2 * meta_.size() + kSlabRows) meta_.shrink_to_fit();
  if (index_.capacity() > 4 * index_.size() + 1024) index_.rehash(0);
}

std::vector<RowTable::Victim> RowTable::ChooseVictims(const EvictionConfig& e) {
  std::vector<Victim> expired, ranked;
  int64_t clock = 0;
  bool over = false;
  uint64_t seen = 0;
  for (uint32_t begin = 0;; begin += kSweepRows) {
    absl::ReaderMutexLock lock(&mu_);
    if (begin == 0) {
      clock = clock_;
      over = e.capacity_rows > 0 && size_ > e.capacity_rows;
    }
    const uint32_t end =
        std::min<uint64_t>(size_, uint64_t{begin} + kSweepRows);
    for (uint32_t slot = begin; slot < end; ++slot) {
      const RowMeta& m = meta_[slot];
      if (Expired(e, clock, m)) {
        expired.push_back(Victim{static_cast<uint64_t>(m.last), m.id, true});
      } else if (over) {
        ranked.push_back(Victim{EvictionKey(e, m), m.id, false});
      }
    }
    if (end >= size_) {
      seen = end;
      break;
    }
  }
  const uint64_t left = seen > expired.size() ? seen - expired.size() : 0;
  if (over && left > CapacityTarget(e.capacity_rows)) {
    const size_t k = left - CapacityTarget(e.capacity_rows);
    auto first = [](const Victim& a, const Victim& b) {
      return a.key != b.key ? a.key < b.key : a.id < b.id;
    };
    std::nth_element(ranked.begin(), ranked.begin() + k, ranked.end(), first);
    ranked.resize(k);
    expired.insert(expired.end(), ranked.begin(), ranked.end());
  }
  return expired;
}

uint64_t RowTable::Sweep() {
  if (config_.storage.enabled()) return MoveOut();
  if (!config_.eviction.enabled()) return 0;
  {
    absl::MutexLock lock(&mu_);
    sweep_due_ = false;
    last_sweep_ = clock_;
  }
  const std::vector<Victim> victims = ChooseVictims(config_.eviction);
  uint64_t removed = 0;
  for (size_t begin = 0; begin < victims.size(); begin += kSweepRows) {
    absl::MutexLock lock(&mu_);
    const size_t end = std::min(victims.size(), begin + kSweepRows);
    for (size_t i = begin; i < end; ++i) {
      auto it = index_.find(victims[i].id);
      if (it == index_.end()) continue;  // A restore replaced the rows.
      const RowMeta& m = meta_[it->second];
      // Pushed since the scan: it stays.
      const uint64_t key = victims[i].expired
                               ? static_cast<uint64_t>(m.last)
                               : EvictionKey(config_.eviction, m);
      if (key != victims[i].key) continue;
      RemoveRow(it->second);
      ++removed;
    }
    ShrinkLocked();
  }
  rows_evicted_ += removed;
  return removed;
}

void RowTable::Read(absl::Span<const uint64_t> ids, float* out) const {
  const size_t dim = config_.dim;
  absl::ReaderMutexLock lock(&mu_);
  std::vector<size_t> missed;
  for (size_t i = 0; i < ids.size(); ++i) {
    float* dest = out + i * dim;
    auto it = index_.find(ids[i]);
    if (it == index_.end()) {
      InitRow(config_, seed_, table_, ids[i], absl::MakeSpan(dest, dim));
      if (tier_ != nullptr) missed.push_back(i);
    } else {
      std::memcpy(dest, RowAt(it->second), dim * sizeof(float));
    }
  }
  if (missed.empty()) return;
  std::vector<uint64_t> disk_ids;
  for (size_t i : missed) disk_ids.push_back(ids[i]);
  std::vector<float> rows;
  std::vector<RowMeta> meta;
  std::vector<bool> found;
  ReadDiskLocked(disk_ids, &rows, &meta, &found);
  for (size_t n = 0; n < missed.size(); ++n) {
    if (!found[n]) continue;
    std::memcpy(out + missed[n] * dim, &rows[n * stride_], dim * sizeof(float));
  }
}

bool RowTable::Holds(uint64_t id) const {
  absl::ReaderMutexLock lock(&mu_);
  if (index_.contains(id)) return true;
  if (tier_ == nullptr) return false;
  std::vector<float> row;
  std::vector<RowMeta> meta;
  std::vector<bool> found;
  ReadDiskLocked(absl::MakeConstSpan(&id, 1), &row, &meta, &found);
  return found[0];
}

void RowTable::Apply(absl::Span<const uint64_t> ids,
                     absl::Span<const float> grads, float scale) {
  const size_t dim = config_.dim;
  const int num_slots = optimizer_->num_slots();
  absl::MutexLock lock(&mu_);
  const int64_t step = steps_ + 1;
  const int64_t clock = ++clock_;
  const bool evicting = config_.eviction.enabled() || tier_ != nullptr;
  const bool meta = keeps_meta();
  if (tier_ != nullptr) ReadBackLocked(ids);
  where_.clear();
  taken_.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = index_.find(ids[i]);
    if (it != index_.end()) {
      where_.push_back(it->second);
    } else if (admission_ == nullptr || admission_->Admit(ids[i], step)) {
      where_.push_back(AddRow(ids[i]));
    } else {
      continue;
    }
    taken_.push_back(i);
    if (meta) {
      RowMeta& m = meta_[where_.back()];
      m.last = clock;
      if (m.count < UINT32_MAX) ++m.count;
      if (m.disk == RowMeta::kSame) m.disk = RowMeta::kOlder;
    }
  }
  const size_t k = where_.size();
  rows_not_admitted_ += ids.size() - k;
  if (evicting && SweepDue(sweep_order(), clock, last_sweep_, size_)) {
    sweep_due_ = true;
  }
  if (k == 0) return;    // Nothing to step: the table's step count stays.
  if (k < ids.size()) {  // Only the taken rows' gradients step.
    grads_.resize(k * dim);
    for (size_t n = 0; n < k; ++n) {
      std::memcpy(&grads_[n * dim], &grads[taken_[n] * dim],
                  dim * sizeof(float));
    }
    grads = grads_;
  }
  params_.resize(k * dim);
  slots_.resize(num_slots);
  for (auto& s : slots_) s.resize(k * dim);
  for (size_t i = 0; i < k; ++i) {
    const float* row = RowAt(where_[i]);
    std::memcpy(&params_[i * dim], row, dim * sizeof(float));
    for (int s = 0; s < num_slots; ++s) {
      std::memcpy(&slots_[s][i * dim], row + (s + 1) * dim,
                  dim * sizeof(float));
    }
  }
  ++steps_;
  optimizer_->Apply(absl::MakeSpan(params_), grads, scale,
                    absl::MakeSpan(slots_), steps_);
  for (size_t i = 0; i < k; ++i) {
    float* row = RowAt(where_[i]);
    std::memcpy(row, &params_[i * dim], dim * sizeof(float));
    for (int s = 0; s < num_slots; ++s) {
      std::memcpy(row + (s + 1) * dim, &slots_[s][i * dim],
                  dim * sizeof(float));
    }
  }
}

uint64_t RowTable::rows_in_memory() const {
  absl::ReaderMutexLock lock(&mu_);
  return size_;
}

uint64_t RowTable::rows() const {
  absl::ReaderMutexLock lock(&mu_);
  if (tier_ == nullptr) return size_;
  uint64_t both = 0;  // In memory and on disk.
  for (uint32_t slot = 0; slot < size_; ++slot) {
    both += meta_[slot].disk != RowMeta::kNone;
  }
  return size_ + tier_->rows() - both;
}

uint64_t RowTable::bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  const uint64_t slabs = slabs_.size() * kSlabRows * stride_ * sizeof(float);
  // A Swiss table entry is its value plus one control byte.
  const uint64_t index =
      index_.capacity() * (sizeof(std::pair<const uint64_t, uint32_t>) + 1);
  return slabs + index + meta_.capacity() * sizeof(RowMeta) + removed_.bytes() +
         (admission_ ? admission_->bytes() : 0);
}

int64_t RowTable::clock() const {
  absl::ReaderMutexLock lock(&mu_);
  return clock_;
}

int64_t RowTable::steps() const {
  absl::ReaderMutexLock lock(&mu_);
  return steps_;
}

absl::Status RowTable::Save(std::string* out, const std::string& snapshot_dir) {
  if (config_.storage.enabled()) {
    bool on_disk;
    {
      absl::ReaderMutexLock lock(&mu_);
      on_disk = tier_ != nullptr;
    }
    if (on_disk) return SaveToDisk(snapshot_dir, out);
  }
  absl::ReaderMutexLock lock(&mu_);
  out->append(kMagic, sizeof(kMagic));
  PutBytes(out, table_);
  PutBytes(out, static_cast<uint32_t>(stride_));
  PutBytes(out, steps_);
  PutBytes(out, clock_);
  PutBytes(out, static_cast<uint64_t>(size_));
  const bool meta = keeps_meta();
  PutBytes(out, static_cast<uint8_t>(meta));
  // By slot: the ids in slot order, then the slabs' rows, then each row's
  // last update and count.
  const std::vector<uint64_t> ids = IdsBySlotLocked();
  out->append(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
  for (uint32_t slot = 0; slot < size_; ++slot) {
    out->append(reinterpret_cast<const char*>(RowAt(slot)),
                stride_ * sizeof(float));
  }
  if (!meta) return absl::OkStatus();
  for (const RowMeta& m : meta_) {
    PutBytes(out, m.last);
    PutBytes(out, m.count);
  }
  return absl::OkStatus();
}

absl::StatusOr<RowTable::Saved> RowTable::Parse(absl::string_view* in) const {
  const std::string what =
      absl::StrCat("RestoreState: table '", config_.name, "'");
  ByteCursor cursor(*in);
  char magic[sizeof(kMagic)];
  uint32_t table = 0, stride = 0;
  uint64_t rows = 0;
  Saved saved;
  if (!cursor.Bytes(magic, sizeof(magic)) ||
      (std::memcmp(magic, kMagic, sizeof(magic)) != 0 &&
       std::memcmp(magic, kMagicBeforeClock, sizeof(magic)) != 0 &&
       std::memcmp(magic, kMagicOnDisk, sizeof(magic)) != 0)) {
    return absl::DataLossError(what + ": no rows in the state");
  }
  const bool on_disk = std::memcmp(magic, kMagicOnDisk, sizeof(magic)) == 0;
  uint32_t path_bytes = 0;
  std::string snapshot;
  if (on_disk &&
      (!cursor.Get(&table) || !cursor.Get(&stride) ||
       !cursor.Get(&saved.steps) || !cursor.Get(&saved.clock) ||
       !cursor.Get(&rows) || !cursor.Get(&path_bytes) || path_bytes > 65536 ||
       !cursor.Bytes((snapshot.resize(path_bytes), snapshot.data()),
                     path_bytes))) {
    return absl::DataLossError(what + ": truncated");
  }
  if (on_disk) {
    if (table != table_ || stride != stride_) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": state is of table ", table, " with ", stride,
          " floats per row; expected table ", table_, " with ", stride_));
    }
    absl::ReaderMutexLock lock(&mu_);
    if (tier_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": its rows are on disk (", snapshot,
                       ") and the table has no storage"));
    }
    absl::StatusOr<std::unique_ptr<RowTier>> tier =
        tier_->OpenFrom(snapshot, rows);
    if (!tier.ok()) {
      return absl::Status(tier.status().code(),
                          absl::StrCat(what, ": ", tier.status().message()));
    }
    saved.tier = *std::move(tier);
    *in = *cursor.rest();
    return saved;
  }
  const bool clocked = std::memcmp(magic, kMagic, sizeof(magic)) == 0;
  uint8_t has_meta = 0;
  if (!cursor.Get(&table) || !cursor.Get(&stride) ||
      !cursor.Get(&saved.steps) || (clocked && !cursor.Get(&saved.clock)) ||
      !cursor.Get(&rows) || (clocked && !cursor.Get(&has_meta))) {
    return absl::DataLossError(what + ": truncated");
  }
  if (!clocked) saved.clock = saved.steps;
  if (has_meta > 1) return absl::DataLossError(what + ": damaged");
  if (table != table_ || stride != stride_ || rows >= UINT32_MAX) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": state is of table ", table, " with ", stride,
        " floats per row; expected table ", table_, " with ", stride_));
  }
  absl::string_view& left = *cursor.rest();
  const uint64_t need = rows * 8 + rows * stride * sizeof(float) +
                        (has_meta != 0 ? rows * kMetaBytes : 0);
  if (left.size() < need) {
    return absl::DataLossError(what + ": truncated rows");
  }
  saved.index.reserve(rows);
  for (uint64_t slot = 0; slot < rows; ++slot) {
    uint64_t id;
    std::memcpy(&id, left.data() + slot * 8, 8);
    if (id >= config_.rows ||
        !saved.index.emplace(id, static_cast<uint32_t>(slot)).second) {
      return absl::DataLossError(
          absl::StrCat(what, ": damaged (row id ", id, ")"));
    }
  }
  const char* values = left.data() + rows * 8;
  for (uint64_t slot = 0; slot < rows; ++slot) {
    if (slot % kSlabRows == 0) {
      saved.slabs.push_back(std::make_unique<float[]>(kSlabRows * stride_));
    }
    std::memcpy(saved.slabs.back().get() + (slot % kSlabRows) * stride_,
                values + slot * stride_ * sizeof(float),
                stride_ * sizeof(float));
  }
  const bool meta_kept = keeps_meta();
  if (meta_kept) saved.meta.resize(rows);
  for (const auto& [id, slot] : saved.index) {
    if (meta_kept) saved.meta[slot] = RowMeta{id, saved.clock, 1};
  }
  if (has_meta != 0 && meta_kept) {
    const char* meta = values + rows * stride_ * sizeof(float);
    for (uint64_t slot = 0; slot < rows; ++slot) {
      std::memcpy(&saved.meta[slot].last, meta + slot * kMetaBytes, 8);
      std::memcpy(&saved.meta[slot].count, meta + slot * kMetaBytes + 8, 4);
    }
  }
  saved.size = static_cast<uint32_t>(rows);
  left.remove_prefix(need);
  *in = left;
  absl::ReaderMutexLock lock(&mu_);
  if (tier_ != nullptr) {  // The state has no rows on disk.
    absl::StatusOr<std::unique_ptr<RowTier>> tier = tier_->OpenFrom("", 0);
    if (!tier.ok()) return tier.status();
    saved.tier = *std::move(tier);
  }
  return saved;
}

void RowTable::Install(Saved saved) {
  absl::MutexLock lock(&mu_);
  index_ = std::move(saved.index);
  slabs_ = std::move(saved.slabs);
  size_ = saved.size;
  steps_ = saved.steps;
  clock_ = saved.clock;
  last_sweep_ = saved.clock;
  meta_ = std::move(saved.meta);
  removed_.Clear();
  if (saved.tier != nullptr) tier_ = std::move(saved.tier);
  sweep_due_ = (config_.eviction.enabled() || tier_ != nullptr) &&
               SweepDue(sweep_order(), clock_, last_sweep_, size_);
}

void RowTable::TrackChanges() {
  absl::MutexLock lock(&mu_);
  if (track_changes_.load()) return;
  if (!config_.eviction.enabled()) {
    meta_.resize(size_);
    for (const auto& [id, slot] : index_) meta_[slot] = RowMeta{id, clock_, 1};
  }
  track_changes_ = true;
}

int64_t RowTable::Export(int64_t since, Exported* out) const {
  const size_t dim = config_.dim;
  absl::ReaderMutexLock lock(&mu_);
  const std::vector<uint64_t> ids = IdsBySlotLocked();
  auto add = [out, dim](uint64_t id, const float* row) {
    out->ids.push_back(id);
    out->values.insert(out->values.end(), row, row + dim);
  };
  for (uint32_t slot = 0; slot < size_; ++slot) {
    if (since >= 0 && meta_[slot].last <= since) continue;
    add(ids[slot], RowAt(slot));
  }
  if (tier_ != nullptr) {  // The disk's rows: a scan.
    out->status = tier_->spill().ForEach(
        [&](uint64_t id, const float* row, const RowMeta& m) {
          if ((since < 0 || m.last > since) && !index_.contains(id)) {
            add(id, row);
          }
        });
  }
  if (since >= 0) {
    removed_.ForEachSince(since,
                          [out](uint64_t id) { out->dropped.push_back(id); });
  }
  return clock_;
}

void RowTable::ForgetRemovedBefore(int64_t clock) {
  absl::MutexLock lock(&mu_);
  removed_.ForgetBefore(clock);
}

uint64_t RowTable::removed_held() const {
  absl::ReaderMutexLock lock(&mu_);
  return removed_.size();
}

absl::Status RowTable::SaveChanges(int64_t since, std::string* out,
                                   const std::string& snapshot_dir) {
  if (config_.storage.enabled()) {
    bool on_disk;
    {
      absl::ReaderMutexLock lock(&mu_);
      on_disk = tier_ != nullptr;
    }
    // A snapshot too: it shares the files of the snapshots before it.
    if (on_disk) return SaveToDisk(snapshot_dir, out);
  }
  absl::ReaderMutexLock lock(&mu_);
  out->append(kRowChangesMagic, sizeof(kRowChangesMagic));
  PutBytes(out, table_);
  PutBytes(out, static_cast<uint32_t>(stride_));
  PutBytes(out, steps_);
  PutBytes(out, clock_);
  PutBytes(out, since);
  // The dropped ids (a row dropped and pushed again is in both lists: the
  // drop goes first).
  const size_t count_at = out->size();
  PutBytes(out, uint64_t{0});
  uint64_t dropped = 0;
  removed_.ForEachSince(since, [&](uint64_t id) {
    PutBytes(out, id);
    ++dropped;
  });
  std::memcpy(&(*out)[count_at], &dropped, sizeof(dropped));
  const size_t changed_at = out->size();
  PutBytes(out, uint64_t{0});
  uint64_t changed = 0;
  for (uint32_t slot = 0; slot < size_ && slot < meta_.size(); ++slot) {
    const RowMeta& m = meta_[slot];
    if (m.last <= since) continue;
    PutBytes(out, m.id);
    out->append(reinterpret_cast<const char*>(RowAt(slot)),
                stride_ * sizeof(float));
    PutBytes(out, m.last);
    PutBytes(out, m.count);
    ++changed;
  }
  std::memcpy(&(*out)[changed_at], &changed, sizeof(changed));
  return absl::OkStatus();
}

absl::Status RowTable::ParseChangesInto(absl::string_view* in,
                                        Saved* saved) const {
  if (in->size() >= sizeof(kMagicOnDisk) &&
      std::memcmp(in->data(), kMagicOnDisk, sizeof(kMagicOnDisk)) == 0) {
    // A table with storage saves whole: the changes replace the state.
    ASSIGN_OR_RETURN(*saved, Parse(in));
    return absl::OkStatus();
  }
  return ApplyRowChanges(RowFormat{&config_, table_, stride_, keeps_meta()}, in,
                         saved);
}

void RowTable::ReadDiskLocked(absl::Span<const uint64_t> ids,
                              std::vector<float>* out,
                              std::vector<RowMeta>* meta,
                              std::vector<bool>* found) const {
  out->resize(ids.size() * stride_);
  meta->assign(ids.size(), RowMeta{});
  absl::Status s =
      tier_->spill().Get(ids, out->data(), absl::MakeSpan(*meta), found);
  if (!s.ok()) {
    // A row the disk cannot give back would be served or stepped from
    // its initial values: stop, and let the checkpoint restore.
    spdlog::critical(
        "table '{}': reading rows back from disk failed: {}; the server "
        "stops (its checkpoint restores it)",
        config_.name, std::string(s.message()));
    std::abort();
  }
}

void RowTable::ReadBackLocked(absl::Span<const uint64_t> ids) {
  std::vector<uint64_t> missed;
  for (uint64_t id : ids) {
    if (!index_.contains(id)) missed.push_back(id);
  }
  if (missed.empty()) return;
  std::vector<float> rows;
  std::vector<RowMeta> meta;
  std::vector<bool> found;
  ReadDiskLocked(missed, &rows, &meta, &found);
  uint64_t n = 0;
  for (size_t i = 0; i < missed.size(); ++i) {
    if (!found[i]) continue;
    const uint32_t slot = AddSlot(missed[i]);
    std::memcpy(RowAt(slot), &rows[i * stride_], stride_ * sizeof(float));
    RowMeta& m = meta_[slot];
    m.last = meta[i].last;
    m.count = meta[i].count;
    m.disk = RowMeta::kSame;
    ++n;
  }
  rows_read_back_ += n;
}

uint64_t RowTable::MoveOut() {
  std::shared_ptr<RowTier> tier;
  {
    absl::MutexLock lock(&mu_);
    sweep_due_ = false;
    last_sweep_ = clock_;
    tier = tier_;
  }
  if (tier == nullptr) return 0;
  const std::vector<Victim> victims = ChooseVictims(memory_order_);
  uint64_t moved = 0;
  std::vector<uint64_t> ids;
  std::vector<float> rows;
  std::vector<RowMeta> metas;
  for (size_t begin = 0; begin < victims.size(); begin += kSweepRows) {
    const size_t end = std::min(victims.size(), begin + kSweepRows);
    absl::MutexLock write(&write_mu_);
    ids.clear();
    rows.clear();
    metas.clear();
    uint64_t added = 0;
    {
      // The rows whose copy on disk is not theirs yet.
      absl::ReaderMutexLock lock(&mu_);
      if (tier_ != tier) break;  // A restore replaced the rows.
      for (size_t i = begin; i < end; ++i) {
        auto it = index_.find(victims[i].id);
        if (it == index_.end()) continue;
        const RowMeta& m = meta_[it->second];
        if (EvictionKey(memory_order_, m) != victims[i].key ||
            m.disk == RowMeta::kSame) {
          continue;
        }
        ids.push_back(m.id);
        const float* row = RowAt(it->second);
        rows.insert(rows.end(), row, row + stride_);
        metas.push_back(m);
        added += m.disk == RowMeta::kNone;
      }
    }
    if (absl::Status s = tier->Write(ids, rows.data(), metas, added); !s.ok()) {
      spdlog::error("table '{}': moving rows to disk: {}; they stay in memory",
                    config_.name, std::string(s.message()));
      break;
    }
    const absl::flat_hash_set<uint64_t> written(ids.begin(), ids.end());
    absl::MutexLock lock(&mu_);
    if (tier_ != tier) break;
    for (size_t i = begin; i < end; ++i) {
      auto it = index_.find(victims[i].id);
      if (it == index_.end()) continue;
      RowMeta& m = meta_[it->second];
      const bool wrote = written.contains(m.id);
      if (EvictionKey(memory_order_, m) == victims[i].key &&
          (wrote || m.disk == RowMeta::kSame)) {
        RemoveRow(it->second, /*dropped=*/false);
        ++moved;
      } else if (wrote) {  // Pushed since: the disk's copy is older.
        m.disk = RowMeta::kOlder;
      }
    }
    ShrinkLocked();
  }
  rows_moved_out_ += moved;
  return moved;
}

absl::Status RowTable::SaveToDisk(const std::string& snapshot_dir,
                                  std::string* out) {
  const std::string what = absl::StrCat("table '", config_.name, "'");
  if (snapshot_dir.empty()) {
    return absl::FailedPreconditionError(
        what +
        ": rows on disk are saved into a checkpoint only "
        "(checkpoint.dir)");
  }
  absl::MutexLock writers(&write_mu_);
  absl::MutexLock lock(&mu_);
  // Every row onto the disk: those it has no copy of, or an older one.
  std::vector<uint64_t> ids;
  std::vector<float> rows;
  std::vector<RowMeta> metas;
  std::vector<uint32_t> slots;
  uint64_t added = 0;
  auto write = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    RETURN_IF_ERROR(tier_->Write(ids, rows.data(), metas, added));
    for (uint32_t slot : slots) meta_[slot].disk = RowMeta::kSame;
    ids.clear();
    rows.clear();
    metas.clear();
    slots.clear();
    added = 0;
    return absl::OkStatus();
  };
  absl::Status s;
  for (uint32_t slot = 0; slot < size_ && s.ok(); ++slot) {
    const RowMeta& m = meta_[slot];
    if (m.disk == RowMeta::kSame) continue;
    ids.push_back(m.id);
    rows.insert(rows.end(), RowAt(slot), RowAt(slot) + stride_);
    metas.push_back(m);
    slots.push_back(slot);
    added += m.disk == RowMeta::kNone;
    if (ids.size() == kSweepRows) s = write();
  }
  if (s.ok()) s = write();
  if (s.ok()) s = tier_->Snapshot(snapshot_dir);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
  out->append(kMagicOnDisk, sizeof(kMagicOnDisk));
  PutBytes(out, table_);
  PutBytes(out, static_cast<uint32_t>(stride_));
  PutBytes(out, steps_);
  PutBytes(out, clock_);
  PutBytes(out, tier_->rows());
  PutBytes(out, static_cast<uint32_t>(snapshot_dir.size()));
  out->append(snapshot_dir);
  return absl::OkStatus();
}

}  // namespace paramd
