#include "tools/serve/model_export.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/crc32.h"
#include "common/base/status_macros.h"

namespace paramd {
namespace {

constexpr char kHeader[] = "paramd-export 1";

std::string Name(uint64_t sequence, absl::string_view suffix) {
  return absl::StrFormat("export-%06u.%s", sequence, suffix);
}

template <typename T>
void Append(std::string* out, const T* values, size_t n) {
  out->append(reinterpret_cast<const char*>(values), n * sizeof(T));
}

bool HasSpace(absl::string_view s) {
  return s.empty() || std::any_of(s.begin(), s.end(), [](char c) {
           return c == ' ' || c == '\t' || c == '\n' || c == '\r';
         });
}

// A manifest's data files: name -> (bytes, CRC-32).
using ManifestFiles = std::map<std::string, std::pair<uint64_t, uint32_t>>;

// The manifest's fields, parsed line by line.
class ManifestReader {
 public:
  ManifestReader(std::string path, absl::string_view text)
      : path_(std::move(path)), lines_(absl::StrSplit(text, '\n')) {}

  absl::Status Read(ModelExport* m, ManifestFiles* files) {
    if (lines_.empty() || lines_[0] != kHeader) {
      return Error(
          1, absl::StrCat("not an export manifest (no '", kHeader, "' line)"));
    }
    bool ended = false;
    for (size_t i = 1; i < lines_.size() && !ended; ++i) {
      const std::vector<std::string> f =
          absl::StrSplit(lines_[i], ' ', absl::SkipEmpty());
      if (f.empty()) continue;
      const int line = static_cast<int>(i + 1);
      auto num = [&](size_t k, uint64_t* v) {
        return k < f.size() && absl::SimpleAtoi(f[k], v);
      };
      uint64_t a = 0, b = 0, c = 0;
      if (f[0] == "end") {
        ended = true;
      } else if (f[0] == "sequence" && num(1, &m->sequence)) {
      } else if (f[0] == "kind" && f.size() == 2 &&
                 (f[1] == "full" || f[1] == "incremental")) {
        m->incremental = f[1] == "incremental";
      } else if (f[0] == "base" && num(1, &m->base)) {
      } else if (f[0] == "job_id" && f.size() == 2) {
        m->job_id = f[1];
      } else if (f[0] == "seed" && num(1, &m->seed)) {
      } else if (f[0] == "shard" && num(1, &a) && num(2, &b) && num(3, &c) &&
                 a == m->versions.size()) {
        m->versions.push_back(b);
        m->since.push_back(c);
      } else if (f[0] == "tensor" && f.size() == 4 && num(2, &a)) {
        ExportedTensor t;
        t.name = f[1];
        for (absl::string_view d : absl::StrSplit(f[3], 'x')) {
          int64_t n = 0;
          if (!absl::SimpleAtoi(d, &n) || n < 0) {
            return Error(line, "a tensor's shape is not NxMx...");
          }
          t.shape.push_back(n);
        }
        offsets_.push_back(a);
        m->tensors.push_back(std::move(t));
      } else if (f[0] == "table" && f.size() == 9 && num(1, &a) && num(3, &b) &&
                 num(4, &c)) {
        ExportedTable t;
        t.index = static_cast<uint32_t>(a);
        t.config.name = f[2];
        t.config.dim = static_cast<int>(b);
        t.config.rows = c;
        t.config.init = f[5];
        uint64_t rows = 0, dropped = 0;
        if (!absl::SimpleAtod(f[6], &t.config.init_scale) || !num(7, &rows) ||
            !num(8, &dropped) || b == 0 || b > 65536) {
          return Error(line, "a table line's numbers do not read");
        }
        counts_.emplace_back(rows, dropped);
        m->tables.push_back(std::move(t));
      } else if (f[0] == "file" && f.size() == 4 && num(2, &a)) {
        uint32_t crc = 0;
        if (!absl::SimpleHexAtoi(f[3], &crc)) {
          return Error(line, "a file's CRC is not hexadecimal");
        }
        (*files)[f[1]] = {a, crc};
      } else {
        return Error(line, absl::StrCat("cannot read '", lines_[i], "'"));
      }
    }
    if (!ended) return Error(0, "no 'end' line: cut short");
    return absl::OkStatus();
  }

  const std::vector<uint64_t>& offsets() const { return offsets_; }
  const std::vector<std::pair<uint64_t, uint64_t>>& counts() const {
    return counts_;
  }

 private:
  absl::Status Error(int line, absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(
        path_, line > 0 ? absl::StrCat(":", line) : "", ": ", what));
  }
  const std::string path_;
  const std::vector<std::string> lines_;
  std::vector<uint64_t> offsets_;
  std::vector<std::pair<uint64_t, uint64_t>> counts_;
};

}  // namespace

absl::StatusOr<std::vector<ExportEntry>> ListExports(FileSystem* fs,
                                                     const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = fs->List(dir);
  if (absl::IsNotFound(names.status())) return std::vector<ExportEntry>();
  RETURN_IF_ERROR(names.status());
  std::vector<ExportEntry> out;
  for (const std::string& name : *names) {
    ExportEntry e;
    if (!absl::StartsWith(name, "export-") ||
        !absl::EndsWith(name, ".manifest") ||
        !absl::SimpleAtoi(
            absl::string_view(name).substr(7, name.size() - 7 - 9),
            &e.sequence) ||
        e.sequence == 0) {
      continue;
    }
    e.manifest = absl::StrCat(dir, "/", name);
    ASSIGN_OR_RETURN(const std::string text, fs->ReadFile(e.manifest));
    ModelExport head;
    ManifestFiles files;
    RETURN_IF_ERROR(ManifestReader(e.manifest, text).Read(&head, &files));
    if (head.sequence != e.sequence) {
      return absl::DataLossError(
          absl::StrCat(e.manifest, ": says sequence ", head.sequence));
    }
    e.incremental = head.incremental;
    e.base = head.base;
    e.versions = head.versions;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const ExportEntry& a, const ExportEntry& b) {
              return a.sequence < b.sequence;
            });
  return out;
}

absl::StatusOr<std::string> WriteModelExport(FileSystem* fs,
                                             const std::string& dir,
                                             const ModelExport& m) {
  if (m.sequence == 0 || (m.incremental && m.base >= m.sequence) ||
      HasSpace(m.job_id) || m.versions.size() != m.since.size()) {
    return absl::InvalidArgumentError(
        "export: sequence, base, job id or shard versions are not whole");
  }
  RETURN_IF_ERROR(fs->MakeDirs(dir));
  const std::string manifest_path =
      absl::StrCat(dir, "/", Name(m.sequence, "manifest"));
  if (fs->ReadFile(manifest_path).ok()) {
    return absl::AlreadyExistsError(
        absl::StrCat("export: ", manifest_path, " exists already"));
  }
  std::string manifest = absl::StrCat(kHeader, "\n");
  absl::StrAppend(&manifest, "sequence ", m.sequence, "\nkind ",
                  m.incremental ? "incremental" : "full", "\nbase ", m.base,
                  "\njob_id ", m.job_id, "\nseed ", m.seed, "\n");
  for (size_t k = 0; k < m.versions.size(); ++k) {
    absl::StrAppend(&manifest, "shard ", k, " ", m.versions[k], " ", m.since[k],
                    "\n");
  }
  std::vector<std::pair<std::string, std::string>> files;
  std::string tensors;
  for (const ExportedTensor& t : m.tensors) {
    if (HasSpace(t.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("export: tensor name '", t.name, "' has a space"));
    }
    absl::StrAppend(&manifest, "tensor ", t.name, " ", tensors.size() / 4, " ",
                    absl::StrJoin(t.shape, "x"), "\n");
    Append(&tensors, t.values.data(), t.values.size());
  }
  files.emplace_back(Name(m.sequence, "tensors"), std::move(tensors));
  for (const ExportedTable& t : m.tables) {
    const size_t dim = t.config.dim;
    if (HasSpace(t.config.name) || HasSpace(t.config.init) || dim == 0 ||
        t.values.size() != t.ids.size() * dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("export: table '", t.config.name, "' is not whole"));
    }
    absl::StrAppend(&manifest, "table ", t.index, " ", t.config.name, " ", dim,
                    " ", t.config.rows, " ", t.config.init, " ",
                    absl::StrFormat("%.9g", t.config.init_scale), " ",
                    t.ids.size(), " ", t.dropped.size(), "\n");
    std::string rows;
    rows.reserve(t.ids.size() * (8 + 4 * dim));
    for (size_t i = 0; i < t.ids.size(); ++i) {
      Append(&rows, &t.ids[i], 1);
      Append(&rows, &t.values[i * dim], dim);
    }
    files.emplace_back(
        Name(m.sequence, absl::StrCat("table-", t.index, ".rows")),
        std::move(rows));
    if (m.incremental) {
      std::string dropped;
      Append(&dropped, t.dropped.data(), t.dropped.size());
      files.emplace_back(
          Name(m.sequence, absl::StrCat("table-", t.index, ".dropped")),
          std::move(dropped));
    }
  }
  for (const auto& [name, bytes] : files) {
    RETURN_IF_ERROR(fs->WriteFileSynced(absl::StrCat(dir, "/", name), bytes));
    absl::StrAppend(&manifest, "file ", name, " ", bytes.size(), " ",
                    absl::StrFormat("%08x", Crc32(bytes)), "\n");
  }
  absl::StrAppend(&manifest, "end\n");
  RETURN_IF_ERROR(fs->WriteFileSynced(manifest_path + ".tmp", manifest));
  RETURN_IF_ERROR(fs->Rename(manifest_path + ".tmp", manifest_path));
  RETURN_IF_ERROR(fs->SyncDir(dir));
  return manifest_path;
}

absl::StatusOr<ModelExport> ReadModelExport(FileSystem* fs,
                                            const std::string& manifest) {
  ASSIGN_OR_RETURN(const std::string text, fs->ReadFile(manifest));
  ModelExport m;
  ManifestFiles files;
  ManifestReader reader(manifest, text);
  RETURN_IF_ERROR(reader.Read(&m, &files));
  const std::string dir = manifest.substr(0, manifest.rfind('/'));
  // Each data file, whole and with its CRC.
  auto load = [&](const std::string& name) -> absl::StatusOr<std::string> {
    auto it = files.find(name);
    if (it == files.end()) {
      return absl::DataLossError(
          absl::StrCat(manifest, ": lists no file ", name));
    }
    const std::string path = absl::StrCat(dir, "/", name);
    absl::StatusOr<std::string> bytes = fs->ReadFile(path);
    if (!bytes.ok()) {
      return absl::DataLossError(
          absl::StrCat(path, ": ", bytes.status().message()));
    }
    if (bytes->size() != it->second.first ||
        Crc32(*bytes) != it->second.second) {
      return absl::DataLossError(
          absl::StrCat(path, ": ", bytes->size(), " bytes with CRC ",
                       absl::StrFormat("%08x", Crc32(*bytes)),
                       "; the manifest says ", it->second.first, " with ",
                       absl::StrFormat("%08x", it->second.second)));
    }
    return bytes;
  };
  ASSIGN_OR_RETURN(const std::string tensors,
                   load(Name(m.sequence, "tensors")));
  uint64_t end = 0;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    ExportedTensor& t = m.tensors[i];
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    if (reader.offsets()[i] != end || (end + n) * 4 > tensors.size()) {
      return absl::DataLossError(absl::StrCat(manifest, ": tensor ", t.name,
                                              " does not lie where it says"));
    }
    t.values.resize(n);
    std::memcpy(t.values.data(), tensors.data() + end * 4, n * 4);
    end += n;
  }
  for (size_t k = 0; k < m.tables.size(); ++k) {
    ExportedTable& t = m.tables[k];
    const size_t dim = t.config.dim;
    const auto [count, dropped] = reader.counts()[k];
    ASSIGN_OR_RETURN(
        const std::string rows,
        load(Name(m.sequence, absl::StrCat("table-", t.index, ".rows"))));
    if (rows.size() != count * (8 + 4 * dim)) {
      return absl::DataLossError(
          absl::StrCat(manifest, ": table ", t.config.name, " holds ",
                       rows.size(), " bytes, not ", count, " rows"));
    }
    t.ids.resize(count);
    t.values.resize(count * dim);
    for (uint64_t i = 0; i < count; ++i) {
      const char* p = rows.data() + i * (8 + 4 * dim);
      std::memcpy(&t.ids[i], p, 8);
      std::memcpy(&t.values[i * dim], p + 8, 4 * dim);
    }
    if (!m.incremental) continue;
    ASSIGN_OR_RETURN(
        const std::string ids,
        load(Name(m.sequence, absl::StrCat("table-", t.index, ".dropped"))));
    if (ids.size() != dropped * 8) {
      return absl::DataLossError(absl::StrCat(
          manifest, ": table ", t.config.name, "'s dropped ids do not fit"));
    }
    t.dropped.resize(dropped);
    std::memcpy(t.dropped.data(), ids.data(), ids.size());
  }
  return m;
}

}  // namespace paramd
