#include "server/checkpoint/checkpointer.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/status_macros.h"

namespace paramd {
namespace {

constexpr char kMagic[8] = {'P', 'A', 'R', 'A', 'M', 'D', 'C', 'K'};
constexpr uint32_t kFormat = 1;

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

uint32_t Crc(absl::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes lengths in uInt: feed large buffers in pieces.
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(bytes.size(), 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()),
                static_cast<uInt>(n));
    bytes.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
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
              s.store_state.size() + s.metrics_state.size());
  out.append(kMagic, sizeof(kMagic));
  PutU32(&out, kFormat);
  PutU32(&out, static_cast<uint32_t>(s.shard));
  PutBytes(&out, s.job_id);
  PutU64(&out, s.plan_fingerprint);
  PutBytes(&out, s.policy);
  PutU64(&out, s.version);
  PutU32(&out, static_cast<uint32_t>(s.clocks.size()));
  for (size_t r = 0; r < s.clocks.size(); ++r) {
    PutU64(&out, s.clocks[r]);
    PutU64(&out, static_cast<uint64_t>(s.last_accepted[r]));
  }
  PutBytes(&out, s.store_state);
  PutBytes(&out, s.metrics_state);
  PutU32(&out, Crc(out));
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
  if (Crc(body) != stored) {
    return absl::DataLossError(absl::StrFormat(
        "checksum mismatch (stored %08x, computed %08x): torn or damaged",
        stored, Crc(body)));
  }
  Reader r(body.substr(sizeof(kMagic)));
  CheckpointState s;
  uint32_t format = 0, shard = 0, workers = 0;
  RETURN_IF_ERROR(r.U32(&format));
  if (format != kFormat) {
    return absl::DataLossError(
        absl::StrCat("format ", format, "; this build reads ", kFormat));
  }
  RETURN_IF_ERROR(r.U32(&shard));
  s.shard = static_cast<int>(shard);
  RETURN_IF_ERROR(r.Bytes(&s.job_id));
  RETURN_IF_ERROR(r.U64(&s.plan_fingerprint));
  RETURN_IF_ERROR(r.Bytes(&s.policy));
  RETURN_IF_ERROR(r.U64(&s.version));
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
  RETURN_IF_ERROR(r.Bytes(&s.store_state));
  RETURN_IF_ERROR(r.Bytes(&s.metrics_state));
  if (!r.done()) return absl::DataLossError("bytes after the last field");
  return s;
}

Checkpointer::Checkpointer(FileSystem* fs, std::string dir, int shard, int keep)
    : fs_(fs), dir_(std::move(dir)), shard_(shard), keep_(keep) {}

std::string Checkpointer::PathFor(uint64_t version) const {
  return absl::StrFormat("%s/shard-%d-v%020u.ckpt", dir_, shard_, version);
}

absl::StatusOr<std::vector<std::string>> Checkpointer::Existing() {
  absl::StatusOr<std::vector<std::string>> names = fs_->List(dir_);
  if (absl::IsNotFound(names.status())) return std::vector<std::string>();
  RETURN_IF_ERROR(names.status());
  const std::string prefix = absl::StrCat("shard-", shard_, "-v");
  std::vector<std::string> paths;
  for (const std::string& name : *names) {
    uint64_t version = 0;
    if (!absl::StartsWith(name, prefix) || !absl::EndsWith(name, ".ckpt") ||
        name.size() != prefix.size() + 20 + 5 ||
        !absl::SimpleAtoi(name.substr(prefix.size(), 20), &version)) {
      continue;
    }
    paths.push_back(absl::StrCat(dir_, "/", name));
  }
  std::sort(paths.rbegin(), paths.rend());  // Zero-padded: newest first.
  return paths;
}

absl::StatusOr<std::string> Checkpointer::Save(const CheckpointState& state) {
  RETURN_IF_ERROR(fs_->MakeDirs(dir_));
  const std::string path = PathFor(state.version);
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
  ASSIGN_OR_RETURN(std::vector<std::string> paths, Existing());
  for (size_t i = static_cast<size_t>(keep_); i < paths.size(); ++i) {
    RETURN_IF_ERROR(fs_->Remove(paths[i]));
  }
  return path;
}

absl::StatusOr<RestoredCheckpoint> Checkpointer::LoadNewest(
    const std::string& job_id, uint64_t plan_fingerprint) {
  RestoredCheckpoint out;
  ASSIGN_OR_RETURN(std::vector<std::string> paths, Existing());
  for (const std::string& path : paths) {
    absl::StatusOr<std::string> bytes = fs_->ReadFile(path);
    absl::StatusOr<CheckpointState> state =
        bytes.ok() ? DecodeCheckpoint(*bytes) : bytes.status();
    if (state.ok() && state->shard != shard_) {
      state = absl::DataLossError(
          absl::StrCat("holds shard ", state->shard, ", not ", shard_));
    }
    if (!state.ok()) {
      out.skipped.push_back(absl::StrCat(path, ": ", state.status().message()));
      continue;
    }
    if (state->job_id != job_id ||
        state->plan_fingerprint != plan_fingerprint) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "checkpoint %s is of job '%s' with plan fingerprint %016x; this "
          "shard serves job '%s' with plan fingerprint %016x (another job's "
          "checkpoint.dir, or the model, chunk size or servers changed)",
          path, state->job_id, state->plan_fingerprint, job_id,
          plan_fingerprint));
    }
    out.state = *std::move(state);
    out.path = path;
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
  PutU32(&bytes, Crc(bytes));
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
  if (Crc(body) != stored) {
    return absl::DataLossError(
        absl::StrCat(MetricsPath(), ": checksum mismatch"));
  }
  Reader r(body.substr(8));
  std::string metrics;
  RETURN_IF_ERROR(r.Bytes(&metrics));
  return std::optional<std::string>(std::move(metrics));
}

absl::Status Checkpointer::RemoveAll() {
  ASSIGN_OR_RETURN(std::vector<std::string> paths, Existing());
  for (const std::string& path : paths) RETURN_IF_ERROR(fs_->Remove(path));
  absl::Status s = fs_->Remove(MetricsPath());
  if (!s.ok() && !absl::IsNotFound(s)) return s;
  return absl::OkStatus();
}

}  // namespace paramd
