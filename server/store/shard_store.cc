#include "server/store/shard_store.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/half.h"
#include "common/base/status_macros.h"
#include "server/store/state_bytes.h"

namespace paramd {
namespace {

constexpr char kMagic[4] = {'P', 'D', 'S', 'S'};
constexpr uint32_t kFormat = 1;
// A SaveChanges: the dense part whole, then each table's changed rows.
constexpr uint32_t kFormatChanges = 2;

}  // namespace

ShardStore::ShardStore(const ModelSpec& spec, const PartitionPlan& plan,
                       int shard, uint64_t seed,
                       std::unique_ptr<Optimizer> optimizer,
                       std::vector<std::unique_ptr<RowTable>> tables)
    : optimizer_(std::move(optimizer)),
      local_of_global_(plan.chunks().size(), -1),
      shard_(shard),
      tables_(std::move(tables)) {
  std::vector<RowTable*> evicting;
  for (const auto& t : tables_) {
    if (t->config().eviction.enabled() || t->config().storage.enabled()) {
      evicting.push_back(t.get());
    }
  }
  if (!evicting.empty()) {
    evictor_ = std::make_unique<RowEvictor>(std::move(evicting));
  }
  absl::MutexLock lock(&mu_);
  params_ = std::make_shared<ParamSnapshot>();
  for (int global : plan.ChunksOfShard(shard)) {
    const ChunkSpec& c = plan.chunks()[global];
    local_of_global_[global] = static_cast<int>(specs_.size());
    specs_.push_back(c);
    statistic_.push_back(spec.tensors[c.tensor_id].kind ==
                         TensorKind::kStatistic);
    std::vector<float> values(c.length);
    InitTensorRange(spec.tensors[c.tensor_id], seed, c.tensor_id, c.offset,
                    absl::MakeSpan(values));
    params_->params.push_back(std::move(values));
    slots_.emplace_back(optimizer_->num_slots(),
                        std::vector<float>(c.length, 0.0f));
    bytes_ += c.length * kElementBytes;
  }
}

void ShardStore::WakeEvictor() const {
  if (evictor_ == nullptr) return;
  for (const auto& t : tables_) {
    if (t->sweep_due()) {
      evictor_->Wake();
      return;
    }
  }
}

const std::vector<std::vector<uint16_t>>& ParamSnapshot::Halves() const {
  absl::MutexLock lock(&halves_mu_);
  if (halves_version_ != version) {
    halves_.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      halves_[i].resize(params[i].size());
      FloatsToHalves(params[i], absl::MakeSpan(halves_[i]));
    }
    halves_version_ = version;
  }
  // Unchanged while the caller holds the snapshot: only a snapshot nobody
  // holds is stepped.
  return halves_;
}

int ShardStore::LocalIndex(int global) const {
  if (global < 0 || global >= static_cast<int>(local_of_global_.size())) {
    return -1;
  }
  return local_of_global_[global];
}

void ShardStore::ApplyStep(absl::Span<const absl::Span<const float>> grads,
                           float scale, absl::Span<const RowGrads> rows,
                           StepTimes* times) {
  absl::MutexLock lock(&mu_);
  ApplyRowsLocked(rows, scale);
  if (times != nullptr) {
    times->taken = true;
    times->begin = absl::Now();
    times->chunk_ends.resize(params_->params.size());
  }
  // Snapshots are handed out only under mu_, so a count of 1 means no pull
  // still sends this version: step it in place. Otherwise step a copy
  // (into the previous buffer when no pull holds that one any more).
  if (params_.use_count() > 1) {
    std::shared_ptr<ParamSnapshot> next =
        spare_ != nullptr && spare_.use_count() == 1
            ? std::move(spare_)
            : std::make_shared<ParamSnapshot>();
    next->params.resize(params_->params.size());
    for (size_t i = 0; i < params_->params.size(); ++i) {
      next->params[i].assign(params_->params[i].begin(),
                             params_->params[i].end());
    }
    spare_ = std::exchange(params_, std::move(next));
  }
  if (times != nullptr) times->copied = absl::Now();
  const int64_t step = static_cast<int64_t>(version_) + 1;
  std::vector<std::vector<float>>& params = params_->params;
  for (size_t i = 0; i < params.size(); ++i) {
    StepChunk(i, &params[i], grads[i], scale, step);
    if (times != nullptr) times->chunk_ends[i] = absl::Now();
  }
  ++version_;
  params_->version = version_;
  if (times != nullptr) times->version = version_;
}

void ShardStore::ApplyRows(absl::Span<const RowGrads> rows, float scale) {
  absl::MutexLock lock(&mu_);
  ApplyRowsLocked(rows, scale);
}

void ShardStore::ApplyRowsLocked(absl::Span<const RowGrads> rows, float scale) {
  for (const RowGrads& r : rows) {
    if (!r.ids.empty()) tables_[r.table]->Apply(r.ids, r.values, scale);
  }
  WakeEvictor();
}

void ShardStore::StepChunk(size_t local, std::vector<float>* params,
                           absl::Span<const float> grad, float scale,
                           int64_t step) {
  if (statistic_[local]) {
    // A statistic's push is the change itself (TensorKind::kStatistic).
    float* __restrict p = params->data();
    const float* __restrict g = grad.data();
    for (size_t j = 0; j < params->size(); ++j) p[j] += g[j] * scale;
  } else {
    optimizer_->Apply(absl::MakeSpan(*params), grad, scale,
                      absl::MakeSpan(slots_[local]), step);
  }
}

void ShardStore::StepChunks(absl::Span<const int> locals,
                            absl::Span<const absl::Span<const float>> grads,
                            float scale) {
  absl::MutexLock lock(&mu_);
  if (next_ == nullptr) {
    // Into the buffer of an earlier version when no pull holds it; its
    // chunks are overwritten one by one (each before it is stepped).
    next_ = spare_ != nullptr && spare_.use_count() == 1
                ? std::move(spare_)
                : std::make_shared<ParamSnapshot>();
    spare_.reset();
    next_->params.resize(params_->params.size());
    next_->version = version_ + 1;
    stepped_.assign(params_->params.size(), false);
    slots_before_.resize(params_->params.size());
  }
  const int64_t step = static_cast<int64_t>(version_) + 1;
  for (int local : locals) {
    const auto i = static_cast<size_t>(local);
    if (stepped_[i]) continue;
    next_->params[i].assign(params_->params[i].begin(),
                            params_->params[i].end());
    // Kept for a SaveState before the step is finished.
    slots_before_[i].resize(slots_[i].size());
    for (size_t k = 0; k < slots_[i].size(); ++k) {
      slots_before_[i][k].assign(slots_[i][k].begin(), slots_[i][k].end());
    }
    StepChunk(i, &next_->params[i], grads[i], scale, step);
    stepped_[i] = true;
  }
}

void ShardStore::FinishChunkedStep(absl::Span<const RowGrads> rows) {
  absl::MutexLock lock(&mu_);
  ApplyRowsLocked(rows, 1.0f);
  if (next_ == nullptr) {
    // No chunk was stepped (no gradient reached any): the next version
    // holds the same parameters.
    AdvanceLocked(version_ + 1);
    return;
  }
  for (size_t i = 0; i < stepped_.size(); ++i) {
    if (!stepped_[i]) {
      next_->params[i].assign(params_->params[i].begin(),
                              params_->params[i].end());
    }
  }
  spare_ = std::exchange(params_, std::move(next_));
  ++version_;
  params_->version = version_;
}

bool ShardStore::stepping_chunks() const {
  absl::ReaderMutexLock lock(&mu_);
  return next_ != nullptr;
}

std::shared_ptr<const ParamSnapshot> ShardStore::SnapshotAt(
    uint64_t version) const {
  absl::ReaderMutexLock lock(&mu_);
  if (next_ != nullptr && next_->version == version) return next_;
  return params_;
}

void ShardStore::Assign(absl::Span<const absl::Span<const float>> values) {
  auto next = std::make_shared<ParamSnapshot>();
  next->params.resize(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    next->params[i].assign(values[i].begin(), values[i].end());
  }
  absl::MutexLock lock(&mu_);
  next->version = version_;
  // A pull may still send the old snapshot; it is not changed.
  params_ = std::move(next);
  spare_.reset();
}

void ShardStore::SaveDenseLocked(uint32_t format, std::string* out) const {
  out->clear();
  // One allocation for the dense part: a checkpoint of a large shard is
  // captured under the policy's lock, on a push's path.
  size_t dense = sizeof(kMagic) + 64;
  for (size_t i = 0; i < specs_.size(); ++i) {
    dense +=
        16 + sizeof(float) * params_->params[i].size() * (1 + slots_[i].size());
  }
  out->reserve(dense);
  out->append(kMagic, sizeof(kMagic));
  PutBytes(out, format);
  PutBytes(out, static_cast<uint32_t>(specs_.size()));
  PutBytes(out, static_cast<uint32_t>(optimizer_->num_slots()));
  PutBytes(out, version_);
  for (size_t i = 0; i < specs_.size(); ++i) {
    PutBytes(out, static_cast<uint32_t>(specs_[i].tensor_id));
    PutBytes(out, static_cast<uint32_t>(specs_[i].chunk_index));
    PutBytes(out, static_cast<uint64_t>(specs_[i].length));
    out->append(reinterpret_cast<const char*>(params_->params[i].data()),
                params_->params[i].size() * sizeof(float));
    // A chunked step under way stepped some chunks' slots already: the
    // state is the current version's, so those are saved as they were.
    const bool ahead = next_ != nullptr && stepped_[i];
    for (const std::vector<float>& slot :
         ahead ? slots_before_[i] : slots_[i]) {
      out->append(reinterpret_cast<const char*>(slot.data()),
                  slot.size() * sizeof(float));
    }
  }
}

absl::Status ShardStore::SaveState(std::string* out) const {
  absl::ReaderMutexLock lock(&mu_);
  SaveDenseLocked(kFormat, out);
  // Then the tables' rows (none for a dense model).
  for (const auto& table : tables_) {
    RETURN_IF_ERROR(table->Save(out, SnapshotDirLocked(*table)));
  }
  return absl::OkStatus();
}

std::string ShardStore::SnapshotDirLocked(const RowTable& table) const {
  if (!table.config().storage.enabled() || !snapshot_dirs_) return "";
  // A folder of its own: a version may be saved twice.
  const std::string base =
      absl::StrCat(snapshot_dirs_(version_), "/", table.config().name);
  std::string dir = base;
  std::error_code e;
  for (int n = 2; std::filesystem::exists(dir, e); ++n) {
    dir = absl::StrCat(base, "-", n);
  }
  return dir;
}

absl::Status ShardStore::SaveChanges(absl::Span<const int64_t> since,
                                     std::string* out) const {
  absl::ReaderMutexLock lock(&mu_);
  SaveDenseLocked(kFormatChanges, out);
  for (size_t t = 0; t < tables_.size(); ++t) {
    RETURN_IF_ERROR(
        tables_[t]->SaveChanges(since[t], out, SnapshotDirLocked(*tables_[t])));
  }
  return absl::OkStatus();
}

std::vector<int64_t> ShardStore::TableClocks() const {
  std::vector<int64_t> clocks;
  for (const auto& table : tables_) clocks.push_back(table->clock());
  return clocks;
}

void ShardStore::TrackChanges() {
  for (const auto& table : tables_) table->TrackChanges();
}

bool ShardStore::tracks_changes() const {
  for (const auto& table : tables_) {
    if (!table->tracks_changes()) return false;
  }
  return true;
}

void ShardStore::HoldDropped(int holder, std::vector<int64_t> clocks) {
  absl::MutexLock lock(&holds_mu_);
  holds_[holder] = std::move(clocks);
  for (size_t t = 0; t < tables_.size(); ++t) {
    int64_t keep = INT64_MAX;
    for (const std::vector<int64_t>& hold : holds_) {
      if (t < hold.size()) keep = std::min(keep, hold[t]);
    }
    tables_[t]->ForgetRemovedBefore(keep);
  }
}

ShardStore::Exported ShardStore::Export(absl::Span<const int64_t> since) const {
  Exported out;
  absl::ReaderMutexLock lock(&mu_);
  out.version = version_;
  out.dense = params_;
  out.tables.resize(tables_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    out.table_clocks.push_back(
        tables_[t]->Export(since.empty() ? -1 : since[t], &out.tables[t]));
    if (out.status.ok()) out.status = out.tables[t].status;
  }
  return out;
}

absl::Status ShardStore::ParseDense(absl::string_view* bytes, uint32_t format,
                                    DenseState* out) const {
  ByteCursor in(*bytes);
  char magic[4];
  uint32_t got_format = 0, chunks = 0, slots = 0;
  if (!in.Bytes(magic, 4) || std::memcmp(magic, kMagic, 4) != 0 ||
      !in.Get(&got_format) || got_format != format) {
    return absl::InvalidArgumentError(
        format == kFormat ? "RestoreState: not a shard state"
                          : "RestoreState: not a shard state's changes");
  }
  if (!in.Get(&chunks) || !in.Get(&slots) || !in.Get(&out->version)) {
    return absl::DataLossError("RestoreState: truncated header");
  }
  if (chunks != specs_.size() ||
      slots != static_cast<uint32_t>(optimizer_->num_slots())) {
    return absl::FailedPreconditionError(
        absl::StrCat("RestoreState: state has ", chunks, " chunks with ", slots,
                     " optimizer slots; this shard has ", specs_.size(),
                     " with ", optimizer_->num_slots()));
  }
  // Read everything into new buffers first: on any error, nothing changes.
  out->params.assign(chunks, {});
  out->slots.assign(chunks, {});
  for (uint32_t i = 0; i < chunks; ++i) {
    uint32_t tensor = 0, index = 0;
    uint64_t length = 0;
    if (!in.Get(&tensor) || !in.Get(&index) || !in.Get(&length)) {
      return absl::DataLossError("RestoreState: truncated chunk header");
    }
    const ChunkSpec& spec = specs_[i];
    if (tensor != static_cast<uint32_t>(spec.tensor_id) ||
        index != static_cast<uint32_t>(spec.chunk_index) ||
        length != static_cast<uint64_t>(spec.length)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "RestoreState: chunk ", i, " is chunk ", index, " of tensor ", tensor,
          " (", length, " elements); expected chunk ", spec.chunk_index,
          " of tensor ", spec.tensor_id, " (", spec.length, ")"));
    }
    out->params[i].resize(length);
    if (!in.Bytes(out->params[i].data(), length * sizeof(float))) {
      return absl::DataLossError("RestoreState: truncated parameters");
    }
    out->slots[i].assign(slots, std::vector<float>(length));
    for (std::vector<float>& slot : out->slots[i]) {
      if (!in.Bytes(slot.data(), length * sizeof(float))) {
        return absl::DataLossError("RestoreState: truncated optimizer slots");
      }
    }
  }
  *bytes = *in.rest();
  return absl::OkStatus();
}

absl::Status ShardStore::RestoreState(absl::string_view state,
                                      absl::string_view changes) {
  DenseState dense;
  RETURN_IF_ERROR(ParseDense(&state, kFormat, &dense));
  std::vector<RowTable::Saved> rows;
  for (const auto& table : tables_) {
    absl::StatusOr<RowTable::Saved> saved = table->Parse(&state);
    if (!saved.ok()) return saved.status();
    rows.push_back(std::move(*saved));
  }
  if (!state.empty()) {
    return absl::DataLossError("RestoreState: trailing bytes after the state");
  }
  if (!changes.empty()) {
    DenseState later;
    RETURN_IF_ERROR(ParseDense(&changes, kFormatChanges, &later));
    if (later.version < dense.version) {
      return absl::FailedPreconditionError(
          absl::StrCat("RestoreState: changes at version ", later.version,
                       " are older than the state they apply to (version ",
                       dense.version, ")"));
    }
    dense = std::move(later);
    for (size_t t = 0; t < tables_.size(); ++t) {
      RETURN_IF_ERROR(tables_[t]->ParseChangesInto(&changes, &rows[t]));
    }
    if (!changes.empty()) {
      return absl::DataLossError(
          "RestoreState: trailing bytes after the changes");
    }
  }
  for (size_t t = 0; t < tables_.size(); ++t) {
    tables_[t]->Install(std::move(rows[t]));
  }
  WakeEvictor();
  absl::MutexLock lock(&mu_);
  // Pulls may still send the old snapshot: restore into a new one.
  params_ = std::make_shared<ParamSnapshot>();
  params_->params = std::move(dense.params);
  params_->version = dense.version;
  spare_.reset();
  slots_ = std::move(dense.slots);
  version_ = dense.version;
  return absl::OkStatus();
}

void ShardStore::AdvanceVersionTo(uint64_t version) {
  absl::MutexLock lock(&mu_);
  AdvanceLocked(version);
}

void ShardStore::AdvanceLocked(uint64_t version) {
  if (version <= version_) return;
  // Pulls may still send the current snapshot: the new version gets its
  // own.
  auto next = std::make_shared<ParamSnapshot>(*params_);
  next->version = version;
  params_ = std::move(next);
  spare_.reset();
  version_ = version;
}

uint64_t ShardStore::version() const {
  absl::ReaderMutexLock lock(&mu_);
  return version_;
}

std::shared_ptr<const ParamSnapshot> ShardStore::Snapshot() const {
  absl::ReaderMutexLock lock(&mu_);
  return params_;
}

void ShardStore::Read(
    const std::function<void(uint64_t, absl::Span<const std::vector<float>>)>&
        read) const {
  absl::ReaderMutexLock lock(&mu_);
  read(version_, params_->params);
}

absl::Status ShardStore::CheckRowRoom(
    absl::Span<const RowGrads> rows,
    const std::function<bool(uint32_t, uint64_t)>& pending,
    const std::vector<uint64_t>& pending_new) const {
  for (const RowGrads& r : rows) {
    const RowTable& t = *tables_[r.table];
    if (!t.limits_rows()) continue;
    const uint64_t limit =
        t.config().max_rows > 0 ? t.config().max_rows : UINT32_MAX - 1;
    uint64_t fresh = 0;
    for (uint64_t id : r.ids) {
      if (!t.Holds(id) && !(pending && pending(r.table, id))) ++fresh;
    }
    const uint64_t held =
        t.rows() + (pending_new.empty() ? 0 : pending_new[r.table]);
    if (held + fresh > limit) {
      return absl::ResourceExhaustedError(
          absl::StrCat("Push: table '", t.config().name, "' on shard ", shard_,
                       " holds ", held, " rows (with this round's); ", fresh,
                       " new rows would pass its limit of ", limit,
                       t.config().max_rows > 0 ? " (model.embeddings max_rows)"
                                               : " rows per shard"));
    }
  }
  return absl::OkStatus();
}

}  // namespace paramd
