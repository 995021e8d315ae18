#include "server/store/row_table.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/model/rows.h"
#include "server/store/state_bytes.h"

namespace paramd {
namespace {

constexpr char kMagic[4] = {'P', 'R', 'O', 'W'};

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
  return slot;
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
  }
  const size_t k = where_.size();
  rows_not_admitted_ += ids.size() - k;
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
  return slabs + index + (admission_ ? admission_->bytes() : 0);
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
  PutBytes(out, static_cast<uint64_t>(size_));
  // By slot: the ids in slot order, then the slabs' rows.
  std::vector<uint64_t> ids(size_);
  for (const auto& [id, slot] : index_) ids[slot] = id;
  out->append(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
  for (uint32_t slot = 0; slot < size_; ++slot) {
    out->append(reinterpret_cast<const char*>(RowAt(slot)),
                stride_ * sizeof(float));
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
      std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(what + ": no rows in the state");
  }
  if (!cursor.Get(&table) || !cursor.Get(&stride) ||
      !cursor.Get(&saved.steps) || !cursor.Get(&rows)) {
    return absl::DataLossError(what + ": truncated");
  }
  if (table != table_ || stride != stride_ || rows >= UINT32_MAX) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": state is of table ", table, " with ", stride,
        " floats per row; expected table ", table_, " with ", stride_));
  }
  absl::string_view& left = *cursor.rest();
  const uint64_t need = rows * 8 + rows * stride * sizeof(float);
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
}

}  // namespace paramd
