#include "tools/ctl/export_job.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "common/model/rows.h"
#include "tools/ctl/rpc/status_client.h"
#include "tools/serve/model_export.h"

namespace paramd {
namespace {

// Merges the shards' rows of one table (each in id order) into `out`.
void MergeRuns(const std::vector<const ExportedTable*>& runs,
               ExportedTable* out) {
  const size_t dim = out->config.dim;
  size_t n = 0;
  for (const ExportedTable* r : runs) {
    n += r->ids.size();
    out->dropped.insert(out->dropped.end(), r->dropped.begin(),
                        r->dropped.end());
  }
  std::vector<size_t> at(runs.size(), 0);
  out->ids.reserve(n);
  out->values.reserve(n * dim);
  while (out->ids.size() < n) {
    size_t best = runs.size();
    for (size_t r = 0; r < runs.size(); ++r) {
      if (at[r] < runs[r]->ids.size() &&
          (best == runs.size() ||
           runs[r]->ids[at[r]] < runs[best]->ids[at[best]])) {
        best = r;
      }
    }
    const ExportedTable& from = *runs[best];
    out->ids.push_back(from.ids[at[best]]);
    out->values.insert(out->values.end(), from.values.begin() + at[best] * dim,
                       from.values.begin() + (at[best] + 1) * dim);
    ++at[best];
  }
  std::sort(out->dropped.begin(), out->dropped.end());
}

// What one shard's export brought.
struct ShardPart {
  uint64_t version = 0;
  std::vector<ExportedTable> tables;  // Its rows, in id order.
  std::vector<int> chunks;            // The plan's chunks it sent.
  absl::Status status;
};

// Reads one page's chunks into `tensors` (each shard's chunks are its own
// elements) and its rows into `part`.
absl::Status TakePage(const proto::ExportResponse& page, int shard,
                      const PartitionPlan& plan,
                      std::vector<ExportedTensor>* tensors, ShardPart* part) {
  const std::string where = absl::StrCat("Export from shard ", shard);
  for (const proto::TensorChunk& c : page.chunks()) {
    const int global = plan.Find(static_cast<int>(c.tensor_id()),
                                 static_cast<int>(c.chunk_index()));
    if (global < 0 || plan.chunks()[global].shard != shard ||
        c.dtype() != proto::DTYPE_FLOAT32 ||
        c.data().size() !=
            static_cast<size_t>(plan.chunks()[global].length) * 4) {
      return absl::DataLossError(
          absl::StrCat(where, ": chunk ", c.chunk_index(), " of tensor ",
                       c.tensor_id(), " is not one of the shard's, whole"));
    }
    const ChunkSpec& spec = plan.chunks()[global];
    std::memcpy(&(*tensors)[spec.tensor_id].values[spec.offset],
                c.data().data(), c.data().size());
    part->chunks.push_back(global);
  }
  for (const auto* blocks : {&page.rows(), &page.dropped()}) {
    const bool dropped = blocks == &page.dropped();
    for (const proto::RowBlock& block : *blocks) {
      if (block.table() >= part->tables.size()) {
        return absl::DataLossError(
            absl::StrCat(where, ": rows of table ", block.table()));
      }
      ExportedTable& t = part->tables[block.table()];
      std::vector<uint64_t> ids;
      RETURN_IF_ERROR(DecodeRowIds(
          block.ids(), t.config.rows,
          absl::StrCat(where, dropped ? ": dropped rows" : ": rows",
                       " of table '", t.config.name, "'"),
          &ids));
      if (dropped) {
        t.dropped.insert(t.dropped.end(), ids.begin(), ids.end());
        continue;
      }
      if (block.data().size() != ids.size() * t.config.dim * 4) {
        return absl::DataLossError(absl::StrCat(
            where, ": table '", t.config.name, "': values do not fit the ids"));
      }
      t.ids.insert(t.ids.end(), ids.begin(), ids.end());
      const size_t at = t.values.size();
      t.values.resize(at + ids.size() * t.config.dim);
      std::memcpy(&t.values[at], block.data().data(), block.data().size());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ExportSummary> ExportJob(const JobConfig& config,
                                        const ExportOptions& options,
                                        FileSystem* fs) {
  if (config.awaits_declaration()) {
    return absl::UnimplementedError(
        "export: the job's workers declare its model (no tensor list or "
        "optimizer in the job file); export reads the job file's model only");
  }
  const ModelSpec spec = BuildModelSpec(config.model);
  ASSIGN_OR_RETURN(
      const PartitionPlan plan,
      PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards()));
  if (static_cast<int>(options.addresses.size()) != config.num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("export: ", options.addresses.size(), " addresses for ",
                     config.num_shards(), " shards"));
  }
  ASSIGN_OR_RETURN(const std::vector<ExportEntry> existing,
                   ListExports(fs, options.out));
  ModelExport model;
  model.sequence = existing.empty() ? 1 : existing.back().sequence + 1;
  model.job_id = config.job_id;
  model.seed = config.seed;
  model.incremental = options.incremental;
  const ExportEntry* base = nullptr;
  if (options.incremental) {
    for (const ExportEntry& e : existing) {
      if (options.since == 0 || e.sequence == options.since) base = &e;
    }
    if (base == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "export: ", options.out, " holds no export ",
          options.since == 0 ? "to follow" : absl::StrCat(options.since),
          ": export whole first (without --since)"));
    }
    if (base->versions.size() != options.addresses.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "export: export ", base->sequence, " has ", base->versions.size(),
          " shards; the job has ", options.addresses.size()));
    }
    model.base = base->sequence;
  }
  for (const TensorSpec& t : spec.tensors) {
    ExportedTensor tensor;
    tensor.name = t.name;
    tensor.shape = t.shape;
    tensor.values.resize(t.num_elements);
    model.tensors.push_back(std::move(tensor));
  }
  for (size_t t = 0; t < config.model.embeddings.size(); ++t) {
    ExportedTable table;
    table.index = static_cast<uint32_t>(t);
    table.config = config.model.embeddings[t];
    model.tables.push_back(std::move(table));
  }
  // Every shard at once (each a thread of its own, over its own channel).
  std::vector<ShardPart> parts(options.addresses.size());
  absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (size_t k = 0; k < options.addresses.size(); ++k) {
    for (const ExportedTable& t : model.tables) {
      ExportedTable empty;
      empty.index = t.index;
      empty.config = t.config;
      parts[k].tables.push_back(std::move(empty));
    }
    threads.emplace_back([&, k] {
      ShardPart& part = parts[k];
      proto::ExportRequest request;
      request.set_job_id(config.job_id);
      request.set_page_rows(options.page_rows);
      if (base != nullptr) {
        request.set_incremental(true);
        request.set_since_version(base->versions[k]);
      }
      bool first = true;
      part.status = ExportAllPages(
          options.addresses[k], options.security, request, options.timeout,
          [&](const proto::ExportResponse& page) {
            if (first) part.version = page.version();
            first = false;
            return TakePage(page, static_cast<int>(k), plan, &model.tensors,
                            &part);
          });
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<bool> chunk_seen(plan.chunks().size(), false);
  for (size_t k = 0; k < parts.size(); ++k) {
    RETURN_IF_ERROR(parts[k].status);
    model.versions.push_back(parts[k].version);
    model.since.push_back(base != nullptr ? base->versions[k] : 0);
    for (int g : parts[k].chunks) chunk_seen[g] = true;
  }
  for (size_t g = 0; g < chunk_seen.size(); ++g) {
    if (!chunk_seen[g]) {
      return absl::DataLossError(absl::StrCat(
          "export: shard ", plan.chunks()[g].shard, " sent no chunk ",
          plan.chunks()[g].chunk_index, " of tensor ",
          spec.tensors[plan.chunks()[g].tensor_id].name));
    }
  }
  const double read_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  start = absl::Now();
  // Each table's rows: the shards' runs merged.
  for (size_t t = 0; t < model.tables.size(); ++t) {
    std::vector<const ExportedTable*> runs;
    for (const ShardPart& part : parts) runs.push_back(&part.tables[t]);
    MergeRuns(runs, &model.tables[t]);
  }
  parts.clear();
  ExportSummary summary;
  summary.read_seconds = read_seconds;
  for (const ExportedTable& table : model.tables) {
    summary.rows += table.ids.size();
    summary.dropped += table.dropped.size();
  }
  summary.order_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (const ExportedTensor& t : model.tensors) {
    summary.tensor_values += t.values.size();
  }
  start = absl::Now();
  ASSIGN_OR_RETURN(summary.manifest, WriteModelExport(fs, options.out, model));
  summary.write_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  summary.sequence = model.sequence;
  summary.base = model.base;
  summary.versions = model.versions;
  return summary;
}

}  // namespace paramd
