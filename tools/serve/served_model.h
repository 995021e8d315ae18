// ServedModel: an exported model (tools/serve/model_export.h) as a
// serving process holds it — the newest full export in a folder with
// every incremental export after it applied in order — and the reads a
// serving process makes: rows by id (those the export does not hold at
// their initial values, as the servers answer) and tensors by name.
// Refresh picks up exports that landed since. Thread-safe: reads share a
// lock, a refresh applies an incremental export under it exclusively (and
// builds a new full one beside it, swapping it in).
#ifndef PARAMD_TOOLS_SERVE_SERVED_MODEL_H_
#define PARAMD_TOOLS_SERVE_SERVED_MODEL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/checkpoint/file_system.h"
#include "tools/serve/model_export.h"

namespace paramd {

class ServedModel {
 public:
  // Loads `dir`'s newest full export and the incremental ones after it;
  // NotFound when the folder holds no full export.
  static absl::StatusOr<std::unique_ptr<ServedModel>> Load(FileSystem* fs,
                                                           std::string dir);

  // Applies the exports that landed since (a newer full one replaces the
  // model); returns how many were taken. An incremental export that does
  // not follow the one held (its base is another) stops the refresh with
  // FailedPrecondition until a full export comes.
  absl::StatusOr<int> Refresh() ABSL_LOCKS_EXCLUDED(mu_);

  struct Read {
    uint64_t sequence = 0;
    std::vector<uint64_t> versions;
  };
  // The rows `ids` of table `table` into out (dim floats each).
  absl::StatusOr<Read> Lookup(const std::string& table,
                              absl::Span<const uint64_t> ids,
                              std::vector<float>* out) const
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Read> Tensor(const std::string& name,
                              std::vector<int64_t>* shape,
                              std::vector<float>* values) const
      ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t sequence() const ABSL_LOCKS_EXCLUDED(mu_);
  // Rows held by table name.
  std::map<std::string, uint64_t> rows() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Table {
    ExportedTable meta;  // Its config and index; ids and values moved out.
    absl::flat_hash_map<uint64_t, uint32_t> slot;
    std::vector<uint64_t> ids;  // By slot.
    std::vector<float> values;  // dim per slot.
  };
  struct State {
    uint64_t sequence = 0;
    uint64_t seed = 0;
    std::vector<uint64_t> versions;
    std::map<std::string, ExportedTensor> tensors;
    std::map<std::string, Table> tables;
  };
  ServedModel(FileSystem* fs, std::string dir)
      : fs_(fs), dir_(std::move(dir)) {}
  static State FromFull(ModelExport full);
  // Applies `delta` (which must follow `state`).
  static absl::Status Apply(ModelExport delta, State* state);

  FileSystem* const fs_;
  const std::string dir_;
  mutable absl::Mutex mu_;
  std::unique_ptr<State> state_ ABSL_GUARDED_BY(mu_);
  uint64_t full_sequence_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace paramd

#endif  // PARAMD_TOOLS_SERVE_SERVED_MODEL_H_
