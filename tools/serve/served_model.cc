#include "tools/serve/served_model.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/model/rows.h"

namespace paramd {

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::Load(
    FileSystem* fs, std::string dir) {
  std::unique_ptr<ServedModel> model(new ServedModel(fs, std::move(dir)));
  RETURN_IF_ERROR(model->Refresh().status());
  absl::MutexLock lock(&model->mu_);
  if (model->state_ == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(model->dir_, " holds no full export (paramctl export)"));
  }
  return model;
}

ServedModel::State ServedModel::FromFull(ModelExport full) {
  State state;
  state.sequence = full.sequence;
  state.seed = full.seed;
  state.versions = std::move(full.versions);
  for (ExportedTensor& t : full.tensors) {
    std::string name = t.name;
    state.tensors[name] = std::move(t);
  }
  for (ExportedTable& t : full.tables) {
    Table table;
    table.ids = std::move(t.ids);
    table.values = std::move(t.values);
    table.slot.reserve(table.ids.size());
    for (size_t i = 0; i < table.ids.size(); ++i) {
      table.slot[table.ids[i]] = static_cast<uint32_t>(i);
    }
    table.meta = std::move(t);
    state.tables[table.meta.config.name] = std::move(table);
  }
  return state;
}

absl::Status ServedModel::Apply(ModelExport delta, State* state) {
  if (delta.base != state->sequence) {
    return absl::FailedPreconditionError(
        absl::StrCat("export ", delta.sequence, " follows export ", delta.base,
                     "; the model holds export ", state->sequence));
  }
  // Checked whole before anything changes.
  for (const ExportedTable& d : delta.tables) {
    auto it = state->tables.find(d.config.name);
    if (it == state->tables.end() ||
        it->second.meta.config.dim != d.config.dim) {
      return absl::FailedPreconditionError(
          absl::StrCat("export ", delta.sequence, ": table '", d.config.name,
                       "' is not the held export's"));
    }
  }
  for (ExportedTable& d : delta.tables) {
    Table& t = state->tables.find(d.config.name)->second;
    const size_t dim = d.config.dim;
    for (uint64_t id : d.dropped) {
      auto found = t.slot.find(id);
      if (found == t.slot.end()) continue;
      const uint32_t slot = found->second;
      const uint32_t last = static_cast<uint32_t>(t.ids.size() - 1);
      t.slot.erase(found);
      if (slot != last) {
        std::memcpy(&t.values[slot * dim], &t.values[last * dim], dim * 4);
        t.ids[slot] = t.ids[last];
        t.slot[t.ids[slot]] = slot;
      }
      t.ids.pop_back();
      t.values.resize(t.ids.size() * dim);
    }
    for (size_t i = 0; i < d.ids.size(); ++i) {
      auto [where, added] =
          t.slot.emplace(d.ids[i], static_cast<uint32_t>(t.ids.size()));
      if (added) {
        t.ids.push_back(d.ids[i]);
        t.values.resize(t.ids.size() * dim);
      }
      std::memcpy(&t.values[where->second * dim], &d.values[i * dim], dim * 4);
    }
  }
  for (ExportedTensor& t : delta.tensors) {
    std::string name = t.name;
    state->tensors[name] = std::move(t);
  }
  state->sequence = delta.sequence;
  state->versions = std::move(delta.versions);
  return absl::OkStatus();
}

absl::StatusOr<int> ServedModel::Refresh() {
  ASSIGN_OR_RETURN(const std::vector<ExportEntry> entries,
                   ListExports(fs_, dir_));
  uint64_t held = 0, full_held = 0;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != nullptr) held = state_->sequence;
    full_held = full_sequence_;
  }
  const ExportEntry* full = nullptr;
  for (const ExportEntry& e : entries) {
    if (!e.incremental) full = &e;
  }
  if (full == nullptr) return 0;
  int taken = 0;
  std::unique_ptr<State> fresh;
  uint64_t at = held;
  if (full->sequence > full_held) {
    ASSIGN_OR_RETURN(ModelExport model, ReadModelExport(fs_, full->manifest));
    fresh = std::make_unique<State>(FromFull(std::move(model)));
    at = full->sequence;
    taken = 1;
  }
  absl::Status status;
  for (const ExportEntry& e : entries) {
    if (e.sequence <= at || !e.incremental) continue;
    absl::StatusOr<ModelExport> delta = ReadModelExport(fs_, e.manifest);
    if (!delta.ok()) {
      status = delta.status();
      break;
    }
    if (fresh != nullptr) {
      status = Apply(*std::move(delta), fresh.get());
    } else {
      absl::MutexLock lock(&mu_);
      status = Apply(*std::move(delta), state_.get());
    }
    if (!status.ok()) break;
    ++taken;
  }
  if (fresh != nullptr) {
    absl::MutexLock lock(&mu_);
    state_ = std::move(fresh);
    full_sequence_ = full->sequence;
  }
  if (!status.ok()) return status;
  return taken;
}

absl::StatusOr<ServedModel::Read> ServedModel::Lookup(
    const std::string& table, absl::Span<const uint64_t> ids,
    std::vector<float>* out) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = state_->tables.find(table);
  if (it == state_->tables.end()) {
    std::vector<std::string> names;
    for (const auto& [name, unused] : state_->tables) names.push_back(name);
    return absl::NotFoundError(
        absl::StrCat("Lookup: export ", state_->sequence, " has no table '",
                     table, "' (tables: ", absl::StrJoin(names, ", "), ")"));
  }
  const Table& t = it->second;
  const size_t dim = t.meta.config.dim;
  out->resize(ids.size() * dim);
  for (size_t i = 0; i < ids.size(); ++i) {
    float* row = out->data() + i * dim;
    if (ids[i] >= t.meta.config.rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("Lookup: id ", ids[i], " of table '", table,
                       "' is not below its rows, ", t.meta.config.rows));
    }
    auto found = t.slot.find(ids[i]);
    if (found != t.slot.end()) {
      std::memcpy(row, &t.values[found->second * dim], dim * 4);
    } else {
      InitRow(t.meta.config, state_->seed, t.meta.index, ids[i],
              absl::MakeSpan(row, dim));
    }
  }
  return Read{state_->sequence, state_->versions};
}

absl::StatusOr<ServedModel::Read> ServedModel::Tensor(
    const std::string& name, std::vector<int64_t>* shape,
    std::vector<float>* values) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = state_->tensors.find(name);
  if (it == state_->tensors.end()) {
    return absl::NotFoundError(absl::StrCat(
        "GetTensor: export ", state_->sequence, " has no tensor '", name, "'"));
  }
  *shape = it->second.shape;
  *values = it->second.values;
  return Read{state_->sequence, state_->versions};
}

uint64_t ServedModel::sequence() const {
  absl::ReaderMutexLock lock(&mu_);
  return state_->sequence;
}

std::map<std::string, uint64_t> ServedModel::rows() const {
  absl::ReaderMutexLock lock(&mu_);
  std::map<std::string, uint64_t> out;
  for (const auto& [name, t] : state_->tables) out[name] = t.ids.size();
  return out;
}

}  // namespace paramd
