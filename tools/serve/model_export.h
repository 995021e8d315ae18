// The model as exported for serving (paramctl export, read by
// paramd-serve): its files in an export folder, written so that a reader
// never sees half an export, and read back with every check.
//
// Export N (a sequence number, from 1) is the files export-NNNNNN.* in the
// folder: .tensors (every dense tensor's float32 values, little-endian,
// one after another), .table-T.rows for each table T (per row: its id as a
// little-endian uint64, then dim float32 values; ids ascending), with an
// incremental export .table-T.dropped (little-endian uint64 ids of rows
// eviction dropped since), and last the .manifest, a text file that says
// what the others hold with their sizes and CRC-32s:
//
//   paramd-export 1
//   sequence 3
//   kind incremental                  (or: full)
//   base 2                            (incremental: the export it follows)
//   job_id click-job
//   seed 7
//   shard 0 1200 1100                 (shard, version, since; 0: full)
//   tensor top.weight 0 16x8          (name, offset in floats, shape)
//   table 0 users 16 1099511627776 normal 0.01 5000 12
//         (index, name, dim, virtual rows, init, init_scale, rows, dropped)
//   file export-000003.tensors 4096 1a2b3c4d   (name, bytes, CRC-32 hex)
//   end
//
// The data files are written and fsynced first, the manifest last (to a
// temporary name, then renamed): an export exists once its manifest does.
// A full export holds every row the servers store; rows not in it have
// their initial values (common/model/rows.h InitRow, from the seed and
// the table's init). An incremental one holds every tensor whole, the rows
// changed since its base and the dropped ids: a reader applies the drops,
// then the rows.
#ifndef PARAMD_TOOLS_SERVE_MODEL_EXPORT_H_
#define PARAMD_TOOLS_SERVE_MODEL_EXPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/table_config.h"
#include "server/checkpoint/file_system.h"

namespace paramd {

struct ExportedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct ExportedTable {
  uint32_t index = 0;           // model.embeddings index.
  EmbeddingTableConfig config;  // name, dim, rows, init, init_scale.
  std::vector<uint64_t> ids;    // Ascending.
  std::vector<float> values;    // dim per id.
  std::vector<uint64_t> dropped;
};

struct ModelExport {
  uint64_t sequence = 0;
  bool incremental = false;
  uint64_t base = 0;  // Incremental: the sequence it follows.
  std::string job_id;
  uint64_t seed = 0;
  // By shard: the version it was exported at, and (incremental) the
  // version of the base export's it holds the changes since.
  std::vector<uint64_t> versions;
  std::vector<uint64_t> since;
  std::vector<ExportedTensor> tensors;
  std::vector<ExportedTable> tables;
};

// One export's manifest in a folder.
struct ExportEntry {
  uint64_t sequence = 0;
  std::string manifest;  // Its path.
  bool incremental = false;
  uint64_t base = 0;
  std::vector<uint64_t> versions;  // By shard.
};

// The exports in `dir`, by sequence (none when the folder does not
// exist), each with its kind and base from its manifest (one that does
// not read is DataLoss naming it).
absl::StatusOr<std::vector<ExportEntry>> ListExports(FileSystem* fs,
                                                     const std::string& dir);

// Writes `model` as export model.sequence into `dir` (created if missing);
// returns the manifest's path. An existing export of that sequence is an
// error (AlreadyExists).
absl::StatusOr<std::string> WriteModelExport(FileSystem* fs,
                                             const std::string& dir,
                                             const ModelExport& model);

// Reads the export whose manifest is `manifest`: DataLoss naming the file
// when one is missing, short, damaged or inconsistent.
absl::StatusOr<ModelExport> ReadModelExport(FileSystem* fs,
                                            const std::string& manifest);

}  // namespace paramd

#endif  // PARAMD_TOOLS_SERVE_MODEL_EXPORT_H_
