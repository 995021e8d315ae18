#include "server/store/row_table.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/model/rows.h"
#include "server/store/state_bytes.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {}  // namespace

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
      stride_(static_cast<size_t>(config.dim) * (1 + optimizer_->num_slots())),
      held_(stride_) {
  if (config.eviction.enabled() || config.storage.enabled()) {
    held_.KeepMeta(0);
  }
  if (config.admission.enabled()) {
    admission_ = std::make_unique<RowAdmission>(config.admission, table, seed);
  }
  if (config.storage.enabled()) {
    memory_order_.capacity_rows =
        RowTier::MemoryRows(config.storage.memory_bytes, stride_);
    absl::MutexLock lock(&mu_);
    ReserveMemoryRows();
  }
}

void RowTable::ReserveMemoryRows() {
  const uint64_t rows = memory_order_.capacity_rows;
  held_.Reserve(rows, RowTier::IndexRows(rows));
}

absl::Status RowTable::OpenStorage(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<RowTier>> tier =
      RowTier::Open(dir, stride_, config_.storage.memory_bytes);
  if (!tier.ok()) {
    return absl::Status(tier.status().code(),
                        absl::StrCat("model.embeddings: table '", config_.name,
                                     "': ", tier.status().message()));
  }
  absl::MutexLock lock(&mu_);
  tier_ = *std::move(tier);
  return absl::OkStatus();
}

uint32_t RowTable::AddRow(uint64_t id) {
  const uint32_t slot = held_.Add(id, clock_);
  float* row = held_.Row(slot);
  InitRow(config_, seed_, table_, id, absl::MakeSpan(row, config_.dim));
  std::fill(row + config_.dim, row + stride_, 0.0f);
  return slot;
}

std::vector<RowVictim> RowTable::ChooseVictims(const EvictionConfig& e) {
  // The expired rows, then those over the capacity's target, least first.
  std::vector<RowVictim> expired;
  std::optional<LeastRows> ranked;
  int64_t clock = 0;
  uint64_t seen = 0;
  for (uint32_t begin = 0;; begin += kSweepRows) {
    absl::ReaderMutexLock lock(&mu_);
    const uint32_t size = held_.size();
    if (begin == 0) {
      clock = clock_;
      if (e.capacity_rows > 0 && size > e.capacity_rows) {
        ranked.emplace(size - CapacityTarget(e.capacity_rows));
      } else if (e.ttl_steps == 0) {
        return {};  // Nothing expires and the table is within capacity.
      }
    }
    const uint32_t end = std::min<uint64_t>(size, uint64_t{begin} + kSweepRows);
    for (uint32_t slot = begin; slot < end; ++slot) {
      const RowMeta& m = held_.meta(slot);
      if (Expired(e, clock, m)) {
        expired.push_back(RowVictim{static_cast<uint64_t>(m.last), m.id, true});
      } else if (ranked) {
        ranked->Offer(RowVictim{EvictionKey(e, m), m.id, false});
      }
    }
    if (end >= size) {
      seen = end;
      break;
    }
  }
  const uint64_t left = seen > expired.size() ? seen - expired.size() : 0;
  if (ranked && left > CapacityTarget(e.capacity_rows)) {
    const std::vector<RowVictim> over =
        std::move(*ranked).Take(left - CapacityTarget(e.capacity_rows));
    expired.insert(expired.end(), over.begin(), over.end());
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
  const std::vector<RowVictim> victims = ChooseVictims(config_.eviction);
  uint64_t removed = 0;
  for (size_t begin = 0; begin < victims.size(); begin += kSweepRows) {
    absl::MutexLock lock(&mu_);
    const size_t end = std::min(victims.size(), begin + kSweepRows);
    for (size_t i = begin; i < end; ++i) {
      const uint32_t slot = held_.Find(victims[i].id);
      if (slot == RowSlots::kNone) continue;  // A restore replaced the rows.
      const RowMeta& m = held_.meta(slot);
      // Pushed since the scan: it stays.
      const uint64_t key = victims[i].expired
                               ? static_cast<uint64_t>(m.last)
                               : EvictionKey(config_.eviction, m);
      if (key != victims[i].key) continue;
      if (track_changes_) removed_.Add(clock_, m.id);
      held_.Remove(slot);
      ++removed;
    }
    held_.Shrink();
  }
  rows_evicted_ += removed;
  return removed;
}

void RowTable::Read(absl::Span<const uint64_t> ids, float* out) const {
  const size_t dim = config_.dim;
  absl::ReaderMutexLock lock(&mu_);
  std::vector<size_t> missed;
  std::vector<uint64_t> disk_ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    float* dest = out + i * dim;
    const uint32_t slot = held_.Find(ids[i]);
    if (slot != RowSlots::kNone) {
      std::memcpy(dest, held_.Row(slot), dim * sizeof(float));
      continue;
    }
    InitRow(config_, seed_, table_, ids[i], absl::MakeSpan(dest, dim));
    if (tier_ != nullptr) {
      missed.push_back(i);
      disk_ids.push_back(ids[i]);
    }
  }
  if (missed.empty()) return;
  std::vector<float> rows;
  std::vector<RowMeta> meta;
  std::vector<bool> found;
  tier_->Read(disk_ids, &rows, &meta, &found, config_.name);
  for (size_t n = 0; n < missed.size(); ++n) {
    if (!found[n]) continue;
    std::memcpy(out + missed[n] * dim, &rows[n * stride_], dim * sizeof(float));
  }
}

bool RowTable::Holds(uint64_t id) const {
  absl::ReaderMutexLock lock(&mu_);
  if (held_.Contains(id)) return true;
  if (tier_ == nullptr) return false;
  std::vector<float> row;
  std::vector<RowMeta> meta;
  std::vector<bool> found;
  tier_->Read(absl::MakeConstSpan(&id, 1), &row, &meta, &found, config_.name);
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
  const bool meta = held_.keeps_meta();
  if (tier_ != nullptr) {
    rows_read_back_ += tier_->ReadBack(ids, &held_, config_.name);
  }
  where_.clear();
  taken_.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint32_t slot = held_.Find(ids[i]);
    if (slot != RowSlots::kNone) {
      where_.push_back(slot);
    } else if (admission_ == nullptr || admission_->Admit(ids[i], step)) {
      where_.push_back(AddRow(ids[i]));
      ++changed_;
    } else {
      continue;
    }
    taken_.push_back(i);
    if (meta) {
      RowMeta& m = held_.meta(where_.back());
      m.last = clock;
      if (m.count < UINT32_MAX) ++m.count;
      if (m.disk == RowMeta::kSame) {
        m.disk = RowMeta::kOlder;
        ++changed_;
      }
    }
  }
  const size_t k = where_.size();
  rows_not_admitted_ += ids.size() - k;
  if (evicting && SweepDue(sweep_order(), clock, last_sweep_, held_.size())) {
    sweep_due_ = true;
  }
  // With storage, also once a sixteenth of its memory's rows changed since
  // the last sweep: its write-back keeps what a checkpoint must write
  // while pushes wait small, full table or not.
  if (tier_ != nullptr && changed_ > memory_order_.capacity_rows / 16) {
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
  gathered_slots_.resize(num_slots);
  for (auto& s : gathered_slots_) s.resize(k * dim);
  for (size_t i = 0; i < k; ++i) {
    const float* row = held_.Row(where_[i]);
    std::memcpy(&params_[i * dim], row, dim * sizeof(float));
    for (int s = 0; s < num_slots; ++s) {
      std::memcpy(&gathered_slots_[s][i * dim], row + (s + 1) * dim,
                  dim * sizeof(float));
    }
  }
  ++steps_;
  optimizer_->Apply(absl::MakeSpan(params_), grads, scale,
                    absl::MakeSpan(gathered_slots_), steps_);
  for (size_t i = 0; i < k; ++i) {
    float* row = held_.Row(where_[i]);
    std::memcpy(row, &params_[i * dim], dim * sizeof(float));
    for (int s = 0; s < num_slots; ++s) {
      std::memcpy(row + (s + 1) * dim, &gathered_slots_[s][i * dim],
                  dim * sizeof(float));
    }
  }
}

uint64_t RowTable::rows() const {
  absl::ReaderMutexLock lock(&mu_);
  if (tier_ == nullptr) return held_.size();
  uint64_t both = 0;  // In memory and on disk.
  for (uint32_t slot = 0; slot < held_.size(); ++slot) {
    both += held_.meta(slot).disk != RowMeta::kNone;
  }
  return held_.size() + tier_->rows() - both;
}

uint64_t RowTable::bytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return held_.bytes() + removed_.bytes() +
         (admission_ ? admission_->bytes() : 0);
}

absl::Status RowTable::Save(std::string* out, const std::string& snapshot_dir) {
  if (on_disk()) return SaveToDisk(snapshot_dir, out);
  absl::ReaderMutexLock lock(&mu_);
  SaveRows(Format(), held_, steps_, clock_, out);
  return absl::OkStatus();
}

absl::StatusOr<RowTable::Saved> RowTable::Parse(absl::string_view* in) const {
  const std::string what =
      absl::StrCat("RestoreState: table '", config_.name, "'");
  absl::ReaderMutexLock lock(&mu_);
  if (!RowTier::IsSave(*in)) {
    ASSIGN_OR_RETURN(Saved saved, ParseRows(Format(), in));
    if (tier_ != nullptr) {  // The state has no rows on disk.
      ASSIGN_OR_RETURN(saved.tier, tier_->OpenFrom("", 0));
    }
    return saved;
  }
  if (tier_ == nullptr) {
    return absl::FailedPreconditionError(
        what + ": its rows are on disk and the table has no storage");
  }
  return tier_->Parse(Format(), in);
}

void RowTable::Install(Saved saved) {
  absl::MutexLock lock(&mu_);
  held_ = std::move(saved.rows);
  steps_ = saved.steps;
  clock_ = saved.clock;
  last_sweep_ = saved.clock;
  removed_.Clear();
  if (saved.tier != nullptr) tier_ = std::move(saved.tier);
  if (config_.storage.enabled()) ReserveMemoryRows();
  sweep_due_ = (config_.eviction.enabled() || tier_ != nullptr) &&
               SweepDue(sweep_order(), clock_, last_sweep_, held_.size());
}

void RowTable::TrackChanges() {
  absl::MutexLock lock(&mu_);
  if (track_changes_.load()) return;
  held_.KeepMeta(clock_);
  track_changes_ = true;
}

int64_t RowTable::Export(int64_t since, Exported* out) const {
  const size_t dim = config_.dim;
  absl::ReaderMutexLock lock(&mu_);
  auto add = [out, dim](uint64_t id, const float* row) {
    out->ids.push_back(id);
    out->values.insert(out->values.end(), row, row + dim);
  };
  const std::vector<uint64_t> ids = held_.IdsBySlot();
  for (uint32_t slot = 0; slot < held_.size(); ++slot) {
    if (since >= 0 && held_.meta(slot).last <= since) continue;
    add(ids[slot], held_.Row(slot));
  }
  if (tier_ != nullptr) {  // The disk's rows: a scan.
    out->status = tier_->spill().ForEach(
        [&](uint64_t id, const float* row, const RowMeta& m) {
          if ((since < 0 || m.last > since) && !held_.Contains(id)) {
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

absl::Status RowTable::SaveChanges(int64_t since, std::string* out,
                                   const std::string& snapshot_dir) {
  // With storage a snapshot too: it shares the files of the snapshots
  // before it.
  if (on_disk()) return SaveToDisk(snapshot_dir, out);
  absl::ReaderMutexLock lock(&mu_);
  SaveRowChanges(Format(), held_, removed_, steps_, clock_, since, out);
  return absl::OkStatus();
}

absl::Status RowTable::ParseChangesInto(absl::string_view* in,
                                        Saved* saved) const {
  if (RowTier::IsSave(*in)) {
    // A table with storage saves whole: the changes replace the state.
    ASSIGN_OR_RETURN(*saved, Parse(in));
    return absl::OkStatus();
  }
  absl::ReaderMutexLock lock(&mu_);
  return ApplyRowChanges(Format(), in, saved);
}

uint64_t RowTable::MoveOut() {
  std::shared_ptr<RowTier> tier;
  {
    absl::MutexLock lock(&mu_);
    sweep_due_ = false;
    last_sweep_ = clock_;
    changed_ = 0;
    tier = tier_;
  }
  if (tier == nullptr) return 0;
  const std::vector<RowVictim> victims = ChooseVictims(memory_order_);
  uint64_t moved = 0;
  RowTier::Piece piece;
  for (size_t begin = 0; begin < victims.size(); begin += kSweepRows) {
    const size_t end = std::min(victims.size(), begin + kSweepRows);
    absl::MutexLock writers(&write_mu_);
    piece.Clear();
    {
      // The rows whose copy on disk is not theirs yet.
      absl::ReaderMutexLock lock(&mu_);
      if (tier_ != tier) break;  // A restore replaced the rows.
      for (size_t i = begin; i < end; ++i) {
        const uint32_t slot = held_.Find(victims[i].id);
        if (slot == RowSlots::kNone) continue;
        const RowMeta& m = held_.meta(slot);
        if (EvictionKey(memory_order_, m) == victims[i].key &&
            m.disk != RowMeta::kSame) {
          piece.Take(held_, slot);
        }
      }
    }
    if (!tier->Write(piece, config_.name)) break;
    const absl::flat_hash_set<uint64_t> written(piece.ids.begin(),
                                                piece.ids.end());
    absl::MutexLock lock(&mu_);
    if (tier_ != tier) break;
    for (size_t i = begin; i < end; ++i) {
      const uint32_t slot = held_.Find(victims[i].id);
      if (slot == RowSlots::kNone) continue;
      RowMeta& m = held_.meta(slot);
      const bool wrote = written.contains(m.id);
      if (EvictionKey(memory_order_, m) == victims[i].key &&
          (wrote || m.disk == RowMeta::kSame)) {
        held_.Remove(slot);
        ++moved;
      } else if (wrote) {  // Pushed since: the disk's copy is older.
        m.disk = RowMeta::kOlder;
      }
    }
    held_.Shrink();
  }
  rows_moved_out_ += moved;
  // Then every row changed since written back, so a checkpoint finds only
  // the rows pushed since to write while pushes wait.
  WriteBack(tier);
  return moved;
}

void RowTable::WriteBack(const std::shared_ptr<RowTier>& tier) {
  RowTier::Piece piece;
  // One pass over the slots: a row pushed behind the pass (or moved there
  // by a removal) waits for the next.
  for (uint32_t next = 0;;) {
    absl::MutexLock writers(&write_mu_);
    piece.Clear();
    {
      absl::ReaderMutexLock lock(&mu_);
      if (tier_ != tier) return;
      for (; next < held_.size() && piece.ids.size() < kSweepRows; ++next) {
        if (held_.meta(next).disk != RowMeta::kSame) piece.Take(held_, next);
      }
    }
    if (piece.ids.empty() || !tier->Write(piece, config_.name)) return;
    absl::MutexLock lock(&mu_);
    if (tier_ != tier) return;
    for (size_t i = 0; i < piece.ids.size(); ++i) {
      const uint32_t slot = held_.Find(piece.ids[i]);
      if (slot == RowSlots::kNone) continue;
      RowMeta& m = held_.meta(slot);
      // Pushed since the copy: the disk holds an older one.
      m.disk = m.last == piece.metas[i].last ? RowMeta::kSame : RowMeta::kOlder;
    }
  }
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
  absl::Status s =
      tier_->Save(Format(), steps_, clock_, snapshot_dir, &held_, out);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace paramd
