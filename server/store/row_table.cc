#include "server/store/row_table.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/model/rows.h"
#include "server/store/state_bytes.h"

namespace paramd {
namespace {

// PRW2 adds the clock and, with eviction, each row's RowMeta; PROW (the
// format before) is still read.
constexpr char kMagic[4] = {'P', 'R', 'W', '2'};
constexpr char kMagicBeforeClock[4] = {'P', 'R', 'O', 'W'};
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
}

float* RowTable::RowAt(uint32_t slot) {
  return slabs_[slot / kSlabRows].get() + (slot % kSlabRows) * stride_;
}

const float* RowTable::RowAt(uint32_t slot) const {
  return slabs_[slot / kSlabRows].get() + (slot % kSlabRows) * stride_;
}

uint32_t RowTable::AddRow(uint64_t id) {
  const uint32_t slot = size_++;
  if (slot / kSlabRows >= slabs_.size()) {
    slabs_.push_back(std::make_unique<float[]>(kSlabRows * stride_));
  }
  float* row = RowAt(slot);
  InitRow(config_, seed_, table_, id, absl::MakeSpan(row, config_.dim));
  std::fill(row + config_.dim, row + stride_, 0.0f);
  index_.emplace(id, slot);
  if (keeps_meta()) meta_.push_back(RowMeta{id, clock_, 0});
  return slot;
}

void RowTable::RemoveRow(uint32_t slot) {
  const uint32_t last = size_ - 1;
  if (track_changes_) removed_.Add(clock_, meta_[slot].id);
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

std::vector<RowTable::Victim> RowTable::ChooseVictims() {
  const EvictionConfig& e = config_.eviction;
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
  if (!config_.eviction.enabled()) return 0;
  {
    absl::MutexLock lock(&mu_);
    sweep_due_ = false;
    last_sweep_ = clock_;
  }
  const std::vector<Victim> victims = ChooseVictims();
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
  for (size_t i = 0; i < ids.size(); ++i) {
    float* dest = out + i * dim;
    auto it = index_.find(ids[i]);
    if (it == index_.end()) {
      InitRow(config_, seed_, table_, ids[i], absl::MakeSpan(dest, dim));
    } else {
      std::memcpy(dest, RowAt(it->second), dim * sizeof(float));
    }
  }
}

bool RowTable::Holds(uint64_t id) const {
  absl::ReaderMutexLock lock(&mu_);
  return index_.contains(id);
}

void RowTable::Apply(absl::Span<const uint64_t> ids,
                     absl::Span<const float> grads, float scale) {
  const size_t dim = config_.dim;
  const int num_slots = optimizer_->num_slots();
  absl::MutexLock lock(&mu_);
  const int64_t step = steps_ + 1;
  const int64_t clock = ++clock_;
  const bool evicting = config_.eviction.enabled();
  const bool meta = keeps_meta();
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
    }
  }
  const size_t k = where_.size();
  rows_not_admitted_ += ids.size() - k;
  if (evicting && SweepDue(config_.eviction, clock, last_sweep_, size_)) {
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

uint64_t RowTable::rows() const {
  absl::ReaderMutexLock lock(&mu_);
  return size_;
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

void RowTable::Save(std::string* out) const {
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
  if (!meta) return;
  for (const RowMeta& m : meta_) {
    PutBytes(out, m.last);
    PutBytes(out, m.count);
  }
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
       std::memcmp(magic, kMagicBeforeClock, sizeof(magic)) != 0)) {
    return absl::DataLossError(what + ": no rows in the state");
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
  sweep_due_ = config_.eviction.enabled() &&
               SweepDue(config_.eviction, clock_, last_sweep_, size_);
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
  for (uint32_t slot = 0; slot < size_; ++slot) {
    if (since >= 0 && meta_[slot].last <= since) continue;
    out->ids.push_back(ids[slot]);
    const float* row = RowAt(slot);
    out->values.insert(out->values.end(), row, row + dim);
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

void RowTable::SaveChanges(int64_t since, std::string* out) const {
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
}

absl::Status RowTable::ParseChangesInto(absl::string_view* in,
                                        Saved* saved) const {
  return ApplyRowChanges(RowFormat{&config_, table_, stride_, keeps_meta()}, in,
                         saved);
}

}  // namespace paramd
