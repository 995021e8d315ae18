#include "server/checkpoint/checkpointer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/crc32.h"
#include "common/base/status_macros.h"

namespace paramd {
namespace {

constexpr char kMagic[8] = {'P', 'A', 'R', 'A', 'M', 'D', 'C', 'K'};
// Format 3 adds rows_applied after the clocks, 2 the kind (full or delta)
// and a delta's base version; 2 and 1 are still read (1 as full).
constexpr uint32_t kFormat = 3;
constexpr uint32_t kFormatBeforeRowsApplied = 2;
constexpr uint32_t kFormatBeforeDeltas = 1;

void PutU32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 4);
}
void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}
void PutBytes(std::string* out, absl::string_view bytes) {
  PutU64(out, bytes.size());
  out->append(bytes.data(), bytes.size());
}

// Reads fields in order; any read past the end is DataLoss.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : rest_(bytes) {}
  absl::Status U32(uint32_t* v) {
    RETURN_IF_ERROR(Need(4, "a 32-bit field"));
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      *v |= static_cast<uint32_t>(static_cast<unsigned char>(rest_[i]))
            << (8 * i);
    }
    rest_.remove_prefix(4);
    return absl::OkStatus();
  }
  absl::Status U64(uint64_t* v) {
    RETURN_IF_ERROR(Need(8, "a 64-bit field"));
    *v = 0;
    for (int i = 0; i < 8; ++i) {
      *v |= static_cast<uint64_t>(static_cast<unsigned char>(rest_[i]))
            << (8 * i);
    }
    rest_.remove_prefix(8);
    return absl::OkStatus();
  }
  absl::Status Bytes(std::string* out) {
    uint64_t n = 0;
    RETURN_IF_ERROR(U64(&n));
    RETURN_IF_ERROR(Need(n, "a byte field"));
    out->assign(rest_.data(), n);
    rest_.remove_prefix(n);
    return absl::OkStatus();
  }
  bool done() const { return rest_.empty(); }

 private:
  absl::Status Need(uint64_t n, const char* what) {
    if (rest_.size() < n) {
      return absl::DataLossError(
          absl::StrCat("truncated: ", what, " runs past the end"));
    }
    return absl::OkStatus();
  }
  absl::string_view rest_;
};

}  // namespace

std::string EncodeCheckpoint(const CheckpointState& s) {
  std::string out;
  // One allocation: the state dominates, and growing by doubling would
  // copy it again and again.
  out.reserve(128 + s.job_id.size() + s.policy.size() + 16 * s.clocks.size() +
              s.store_state.size() + s.store_changes.size() +
              s.metrics_state.size());
  out.append(kMagic, sizeof(kMagic));
  PutU32(&out, kFormat);
  PutU32(&out, static_cast<uint32_t>(s.shard));
  PutBytes(&out, s.job_id);
  PutU64(&out, s.plan_fingerprint);
  PutBytes(&out, s.policy);
  PutU64(&out, s.version);
  PutU32(&out, s.incremental ? 1 : 0);
  PutU64(&out, s.incremental ? s.base_version : 0);
  PutU32(&out, static_cast<uint32_t>(s.clocks.size()));
  for (size_t r = 0; r < s.clocks.size(); ++r) {
    PutU64(&out, s.clocks[r]);
    PutU64(&out, static_cast<uint64_t>(s.last_accepted[r]));
  }
  PutU32(&out, static_cast<uint32_t>(s.rows_applied.size()));
  for (int64_t c : s.rows_applied) PutU64(&out, static_cast<uint64_t>(c));
  PutBytes(&out, s.incremental ? s.store_changes : s.store_state);
  PutBytes(&out, s.metrics_state);
  PutU32(&out, Crc32(out));
  return out;
}

absl::StatusOr<CheckpointState> DecodeCheckpoint(absl::string_view bytes) {
  if (bytes.size() < sizeof(kMagic) + 8 ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("not a paramd checkpoint (no header)");
  }
  const absl::string_view body = bytes.substr(0, bytes.size() - 4);
  Reader crc_reader(bytes.substr(bytes.size() - 4));
  uint32_t stored = 0;
  RETURN_IF_ERROR(crc_reader.U32(&stored));
  if (Crc32(body) != stored) {
    return absl::DataLossError(absl::StrFormat(
        "checksum mismatch (stored %08x, computed %08x): torn or damaged",
        stored, Crc32(body)));
  }
  Reader r(body.substr(sizeof(kMagic)));
  CheckpointState s;
  uint32_t format = 0, shard = 0, workers = 0;
  RETURN_IF_ERROR(r.U32(&format));
  if (format < kFormatBeforeDeltas || format > kFormat) {
    return absl::DataLossError(
        absl::StrCat("format ", format, "; this build reads ",
                     kFormatBeforeDeltas, " to ", kFormat));
  }
  RETURN_IF_ERROR(r.U32(&shard));
  s.shard = static_cast<int>(shard);
  RETURN_IF_ERROR(r.Bytes(&s.job_id));
  RETURN_IF_ERROR(r.U64(&s.plan_fingerprint));
  RETURN_IF_ERROR(r.Bytes(&s.policy));
  RETURN_IF_ERROR(r.U64(&s.version));
  if (format >= kFormatBeforeRowsApplied) {
    uint32_t kind = 0;
    RETURN_IF_ERROR(r.U32(&kind));
    RETURN_IF_ERROR(r.U64(&s.base_version));
    if (kind > 1 || (kind == 1 && s.base_version > s.version)) {
      return absl::DataLossError(
          absl::StrCat("kind ", kind, " on version ", s.base_version));
    }
    s.incremental = kind == 1;
  }
  RETURN_IF_ERROR(r.U32(&workers));
  if (workers > (1u << 20)) {
    return absl::DataLossError(absl::StrCat(workers, " workers"));
  }
  s.clocks.resize(workers);
  s.last_accepted.resize(workers);
  for (uint32_t i = 0; i < workers; ++i) {
    uint64_t last = 0;
    RETURN_IF_ERROR(r.U64(&s.clocks[i]));
    RETURN_IF_ERROR(r.U64(&last));
    s.last_accepted[i] = static_cast<int64_t>(last);
  }
  if (format == kFormat) {
    uint32_t applied = 0;
    RETURN_IF_ERROR(r.U32(&applied));
    if (applied != 0 && applied != workers) {
      return absl::DataLossError(
          absl::StrCat(applied, " rows_applied for ", workers, " workers"));
    }
    s.rows_applied.resize(applied);
    for (int64_t& c : s.rows_applied) {
      uint64_t v = 0;
      RETURN_IF_ERROR(r.U64(&v));
      c = static_cast<int64_t>(v);
    }
  }
  RETURN_IF_ERROR(r.Bytes(s.incremental ? &s.store_changes : &s.store_state));
  RETURN_IF_ERROR(r.Bytes(&s.metrics_state));
  if (!r.done()) return absl::DataLossError("bytes after the last field");
  return s;
}

Checkpointer::Checkpointer(FileSystem* fs, std::string dir, int shard, int keep)
    : fs_(fs), dir_(std::move(dir)), shard_(shard), keep_(keep) {}

std::string Checkpointer::RowsPath(const std::string& dir, int shard,
                                   uint64_t version) {
  return absl::StrFormat("%s/shard-%d-v%020u.rows", dir, shard, version);
}

absl::Status Checkpointer::RemoveRows(uint64_t below,
                                      const std::vector<uint64_t>& kept) {
  namespace fs = std::filesystem;
  const std::string prefix = absl::StrCat("shard-", shard_, "-v");
  std::error_code e;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(dir_, e), end; !e && it != end;
       it.increment(e)) {
    const std::string name = it->path().filename().string();
    uint64_t version = 0;
    if (!absl::StartsWith(name, prefix) || !absl::EndsWith(name, ".rows") ||
        name.size() != prefix.size() + 20 + 5 ||
        !absl::SimpleAtoi(name.substr(prefix.size(), 20), &version)) {
      continue;
    }
    if (version < below &&
        std::find(kept.begin(), kept.end(), version) == kept.end()) {
      stale.push_back(it->path());
    }
  }
  for (const fs::path& path : stale) {
    if (!e) fs::remove_all(path, e);
  }
  if (e && e != std::errc::no_such_file_or_directory) {
    return absl::InternalError(
        absl::StrCat("remove old disk snapshots in ", dir_, ": ", e.message()));
  }
  return absl::OkStatus();
}

std::string Checkpointer::PathFor(uint64_t version, bool delta) const {
  return absl::StrFormat("%s/shard-%d-v%020u.%s", dir_, shard_, version,
                         delta ? "delta" : "ckpt");
}

absl::StatusOr<std::vector<Checkpointer::File>> Checkpointer::Existing() {
  absl::StatusOr<std::vector<std::string>> names = fs_->List(dir_);
  if (absl::IsNotFound(names.status())) return std::vector<File>();
  RETURN_IF_ERROR(names.status());
  const std::string prefix = absl::StrCat("shard-", shard_, "-v");
  std::vector<File> files;
  for (const std::string& name : *names) {
    File file;
    const bool full = absl::EndsWith(name, ".ckpt");
    file.delta = absl::EndsWith(name, ".delta");
    const size_t suffix = full ? 5 : 6;
    if (!absl::StartsWith(name, prefix) || (!full && !file.delta) ||
        name.size() != prefix.size() + 20 + suffix ||
        !absl::SimpleAtoi(name.substr(prefix.size(), 20), &file.version)) {
      continue;
    }
    file.path = absl::StrCat(dir_, "/", name);
    files.push_back(std::move(file));
  }
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
    return a.version != b.version ? a.version > b.version : !a.delta && b.delta;
  });
  return files;
}

absl::StatusOr<std::string> Checkpointer::Save(const CheckpointState& state) {
  RETURN_IF_ERROR(fs_->MakeDirs(dir_));
  const std::string path = PathFor(state.version, state.incremental);
  const std::string tmp = path + ".tmp";
  absl::Status s = fs_->WriteFileSynced(tmp, EncodeCheckpoint(state));
  if (s.ok()) s = fs_->Rename(tmp, path);
  if (!s.ok()) {
    (void)fs_->Remove(tmp);  // A partial temporary file is never read.
    return absl::Status(
        s.code(), absl::StrCat("checkpoint of version ", state.version, ": ",
                               s.message()));
  }
  RETURN_IF_ERROR(fs_->SyncDir(dir_));
  ASSIGN_OR_RETURN(std::vector<File> files, Existing());
  // The newest `keep` full ones, then the newest `keep` deltas on them.
  int fulls = 0, deltas = 0;
  uint64_t oldest_full = 0;
  for (const File& f : files) {
    if (!f.delta && ++fulls <= keep_) oldest_full = f.version;
  }
  fulls = 0;
  std::vector<uint64_t> kept_versions;
  for (const File& f : files) {
    const bool kept = f.delta ? f.version >= oldest_full && ++deltas <= keep_
                              : ++fulls <= keep_;
    if (!kept) RETURN_IF_ERROR(fs_->Remove(f.path));
    if (kept) kept_versions.push_back(f.version);
  }
  RETURN_IF_ERROR(RemoveRows(state.version, kept_versions));
  return path;
}

absl::StatusOr<CheckpointState> Checkpointer::Read(const std::string& path) {
  absl::StatusOr<std::string> bytes = fs_->ReadFile(path);
  absl::StatusOr<CheckpointState> state =
      bytes.ok() ? DecodeCheckpoint(*bytes) : bytes.status();
  if (state.ok() && state->shard != shard_) {
    state = absl::DataLossError(
        absl::StrCat("holds shard ", state->shard, ", not ", shard_));
  }
  return state;
}

absl::StatusOr<RestoredCheckpoint> Checkpointer::LoadNewest(
    const std::string& job_id, uint64_t plan_fingerprint) {
  RestoredCheckpoint out;
  ASSIGN_OR_RETURN(std::vector<File> files, Existing());
  auto check_job = [&](const std::string& path,
                       const CheckpointState& state) -> absl::Status {
    if (state.job_id == job_id && state.plan_fingerprint == plan_fingerprint) {
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint %s is of job '%s' with plan fingerprint %016x; this "
        "shard serves job '%s' with plan fingerprint %016x (another job's "
        "checkpoint.dir, or the model, chunk size or servers changed)",
        path, state.job_id, state.plan_fingerprint, job_id, plan_fingerprint));
  };
  for (const File& file : files) {
    absl::StatusOr<CheckpointState> state = Read(file.path);
    if (state.ok() && state->incremental != file.delta) {
      state = absl::DataLossError(file.delta ? "a full checkpoint named .delta"
                                             : "a delta named .ckpt");
    }
    if (!state.ok()) {
      out.skipped.push_back(
          absl::StrCat(file.path, ": ", state.status().message()));
      continue;
    }
    RETURN_IF_ERROR(check_job(file.path, *state));
    if (file.delta) {
      const std::string base_path = PathFor(state->base_version);
      absl::StatusOr<CheckpointState> base = Read(base_path);
      if (base.ok() && base->incremental) {
        base = absl::DataLossError("a delta named .ckpt");
      }
      if (!base.ok()) {
        out.skipped.push_back(absl::StrCat(file.path, ": its full checkpoint ",
                                           base_path, ": ",
                                           base.status().message()));
        continue;
      }
      RETURN_IF_ERROR(check_job(base_path, *base));
      state->store_state = std::move(base->store_state);
      out.base_path = base_path;
    }
    out.state = *std::move(state);
    out.path = file.path;
    return out;
  }
  if (!out.skipped.empty()) {
    return absl::DataLossError(
        absl::StrCat("every checkpoint of shard ", shard_, " in ", dir_,
                     " is damaged (newest: ", out.skipped.front(),
                     "); start with --fresh to discard them"));
  }
  return out;
}

std::string Checkpointer::MetricsPath() const {
  return absl::StrFormat("%s/shard-%d.metrics", dir_, shard_);
}

absl::Status Checkpointer::SaveMetrics(absl::string_view metrics) {
  RETURN_IF_ERROR(fs_->MakeDirs(dir_));
  std::string bytes("PARAMDMT", 8);
  PutBytes(&bytes, metrics);
  PutU32(&bytes, Crc32(bytes));
  const std::string path = MetricsPath();
  absl::Status s = fs_->WriteFileSynced(path + ".tmp", bytes);
  if (s.ok()) s = fs_->Rename(path + ".tmp", path);
  if (!s.ok()) {
    (void)fs_->Remove(path + ".tmp");
    return s;
  }
  return fs_->SyncDir(dir_);
}

absl::StatusOr<std::optional<std::string>> Checkpointer::LoadMetrics() {
  absl::StatusOr<std::string> bytes = fs_->ReadFile(MetricsPath());
  if (absl::IsNotFound(bytes.status())) return std::optional<std::string>();
  RETURN_IF_ERROR(bytes.status());
  if (bytes->size() < 12 || bytes->compare(0, 8, "PARAMDMT") != 0) {
    return absl::DataLossError(
        absl::StrCat(MetricsPath(), ": not a paramd metrics file"));
  }
  Reader crc_reader(absl::string_view(*bytes).substr(bytes->size() - 4));
  uint32_t stored = 0;
  RETURN_IF_ERROR(crc_reader.U32(&stored));
  const absl::string_view body =
      absl::string_view(*bytes).substr(0, bytes->size() - 4);
  if (Crc32(body) != stored) {
    return absl::DataLossError(
        absl::StrCat(MetricsPath(), ": checksum mismatch"));
  }
  Reader r(body.substr(8));
  std::string metrics;
  RETURN_IF_ERROR(r.Bytes(&metrics));
  return std::optional<std::string>(std::move(metrics));
}

absl::Status Checkpointer::RemoveAll() {
  ASSIGN_OR_RETURN(std::vector<File> files, Existing());
  for (const File& f : files) RETURN_IF_ERROR(fs_->Remove(f.path));
  RETURN_IF_ERROR(RemoveRows(UINT64_MAX, {}));
  absl::Status s = fs_->Remove(MetricsPath());
  if (!s.ok() && !absl::IsNotFound(s)) return s;
  return absl::OkStatus();
}

}  // namespace paramd
