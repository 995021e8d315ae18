#include "worker/data/click_log_file.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/mix.h"
#include "common/base/status_macros.h"

namespace paramd {
namespace {

constexpr int kMaxLabel = 1 << 20;

gzFile File(void* f) { return static_cast<gzFile>(f); }

}  // namespace

uint64_t ClickRow(int field, absl::string_view token, uint64_t rows) {
  // FNV-1a over the token's bytes, keyed by the field, then mixed.
  uint64_t h = 0xcbf29ce484222325ULL ^ Mix(static_cast<uint64_t>(field) + 1);
  for (const char c : token) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return Mix(h) % rows;
}

ClickLogFile::ClickLogFile(std::string path, int fields, int dense,
                           uint64_t table_rows, int rank, int world)
    : path_(std::move(path)),
      fields_(fields),
      dense_(dense),
      table_rows_(table_rows),
      rank_(rank),
      world_(world) {}

ClickLogFile::~ClickLogFile() {
  if (file_ != nullptr) gzclose(File(file_));
}

absl::StatusOr<std::unique_ptr<ClickLogFile>> ClickLogFile::Open(
    const std::string& path, int fields, int dense, uint64_t table_rows,
    int64_t limit, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world || fields < 1 || dense < 0 ||
      table_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ClickLogFile: rank ", rank, " of ", world, ", ", fields, " fields, ",
        dense, " dense, a table of ", table_rows, " rows"));
  }
  std::unique_ptr<ClickLogFile> f(
      new ClickLogFile(path, fields, dense, table_rows, rank, world));
  RETURN_IF_ERROR(f->Rewind());
  // Check every line once, counting samples and classes.
  std::vector<uint64_t> ids(fields);
  std::vector<float> values(dense);
  while (limit == 0 || f->full_size_ < limit) {
    ASSIGN_OR_RETURN(const bool more, f->NextLine());
    if (!more) break;
    int32_t label = 0;
    RETURN_IF_ERROR(
        f->Parse(f->line_number_, ids.data(), values.data(), &label));
    f->num_classes_ = std::max(f->num_classes_, label + 1);
    ++f->full_size_;
  }
  if (f->full_size_ == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no samples"));
  }
  f->size_ = f->full_size_ / world + (rank < f->full_size_ % world ? 1 : 0);
  RETURN_IF_ERROR(f->Rewind());
  return f;
}

absl::Status ClickLogFile::Rewind() {
  if (file_ != nullptr) gzclose(File(file_));
  file_ = gzopen(path_.c_str(), "rb");
  if (file_ == nullptr) {
    return absl::NotFoundError(absl::StrCat(path_, ": cannot open"));
  }
  gzbuffer(File(file_), 1 << 20);
  line_number_ = 0;
  next_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<bool> ClickLogFile::NextLine() {
  line_.clear();
  char buffer[1 << 16];
  while (true) {
    if (gzgets(File(file_), buffer, sizeof(buffer)) == nullptr) {
      int code = 0;
      const char* message = gzerror(File(file_), &code);
      if (code != Z_OK && code != Z_STREAM_END) {
        return absl::DataLossError(
            absl::StrCat(path_, ":", line_number_ + 1, ": ", message));
      }
      if (line_.empty()) return false;
      break;  // A last line without a newline.
    }
    line_ += buffer;
    if (!line_.empty() && line_.back() == '\n') {
      line_.pop_back();
      break;
    }
  }
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  ++line_number_;
  return true;
}

absl::Status ClickLogFile::Parse(int64_t number, uint64_t* ids, float* dense,
                                 int32_t* label) const {
  const absl::string_view line = line_;
  size_t tab = line.find('\t');
  const absl::string_view head = line.substr(0, tab);
  int value = 0;
  if (!absl::SimpleAtoi(head, &value) || value < 0 || value >= kMaxLabel) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ":", number, ": the label '", head,
                     "' is not a class index in [0, ", kMaxLabel, ")"));
  }
  *label = value;
  int column = 0;  // After the label: dense_ values, then fields_ tokens.
  while (tab != absl::string_view::npos) {
    const size_t begin = tab + 1;
    tab = line.find('\t', begin);
    const absl::string_view token = line.substr(
        begin,
        tab == absl::string_view::npos ? absl::string_view::npos : tab - begin);
    if (column < dense_) {
      double v = 0;
      if (!token.empty() &&
          (!absl::SimpleAtod(token, &v) || !std::isfinite(v))) {
        return absl::InvalidArgumentError(
            absl::StrCat(path_, ":", number, ": dense feature ", column + 1,
                         " '", token, "' is not a number"));
      }
      dense[column] = static_cast<float>(std::log1p(std::max(v, 0.0)));
    } else if (column < dense_ + fields_) {
      const int field = column - dense_;
      ids[field] = ClickRow(field, token, table_rows_);
    }
    ++column;
  }
  if (column != dense_ + fields_) {
    return absl::InvalidArgumentError(
        dense_ == 0
            ? absl::StrCat(path_, ":", number, ": ", column,
                           " fields after the label; the model's "
                           "embedding_concat (or features) reads ",
                           fields_)
            : absl::StrCat(path_, ":", number, ": ", column,
                           " columns after the label; the model's "
                           "embedding_concat reads ",
                           dense_, " dense values and ", fields_, " fields"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ClickLogFile::Read(int64_t first, int n, uint64_t* ids,
                                       float* dense, int32_t* y) {
  if (first < 0 || first > size_) {
    return absl::OutOfRangeError(
        absl::StrCat(path_, ": sample ", first, " of a share of ", size_));
  }
  if (first != next_) {
    RETURN_IF_ERROR(Rewind());
  }
  const int count = static_cast<int>(std::min<int64_t>(n, size_ - first));
  for (int s = 0; s < count; ++s) {
    // The share's sample k is the file's line k · world + rank (0-based).
    const int64_t want = (first + s) * world_ + rank_;
    while (line_number_ <= want) {
      ASSIGN_OR_RETURN(const bool more, NextLine());
      if (!more) {
        return absl::DataLossError(
            absl::StrCat(path_, ": ended at line ", line_number_,
                         " while it held more when opened (was it changed?)"));
      }
    }
    RETURN_IF_ERROR(Parse(line_number_, ids + static_cast<int64_t>(s) * fields_,
                          dense + static_cast<int64_t>(s) * dense_, y + s));
  }
  next_ = first + count;
  return count;
}

}  // namespace paramd
