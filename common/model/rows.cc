#include "common/model/rows.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/mix.h"

namespace paramd {
namespace {

// 24 random bits of `bits` as a float in [0, 1), exactly.
float Unit(uint64_t bits) {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

}  // namespace

int RowShard(uint32_t table, uint64_t row, int num_shards) {
  const uint64_t h = Mix(row ^ Mix(0x726F77ULL + table));
  return static_cast<int>(
      (static_cast<unsigned __int128>(h) * static_cast<uint64_t>(num_shards)) >>
      64);
}

void InitRow(const EmbeddingTableConfig& config, uint64_t seed, uint32_t table,
             uint64_t row, absl::Span<float> out) {
  if (config.init == "zeros" || config.init_scale == 0) {
    std::fill(out.begin(), out.end(), 0.0f);
    return;
  }
  const uint64_t stream = Mix(Mix(seed ^ 0x656D62ULL) ^ Mix(table + 1)) ^ row;
  const float scale = static_cast<float>(config.init_scale);
  const bool normal = config.init == "normal";
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t bits = Mix(Mix(stream) + i);
    if (!normal) {
      out[i] = (2.0f * Unit(bits) - 1.0f) * scale;
      continue;
    }
    out[i] = static_cast<float>(NormalFromBits(bits)) * scale;
  }
}

absl::Status DecodeRowIds(absl::string_view bytes, uint64_t rows,
                          const std::string& what, std::vector<uint64_t>* out) {
  if (bytes.size() % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ids hold ", bytes.size(),
                     " bytes, not a whole number of 8-byte ids"));
  }
  const size_t n = bytes.size() / 8;
  out->resize(n);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&(*out)[i], bytes.data() + 8 * i, 8);  // Little-endian host.
  }
  for (size_t i = 0; i < n; ++i) {
    const uint64_t id = (*out)[i];
    if (id >= rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": id ", id, " at position ", i,
                       " is out of range (the table has ", rows, " rows)"));
    }
    if (i > 0 && id <= (*out)[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ids must be strictly ascending (sorted, no duplicates); ",
          id == (*out)[i - 1] ? "duplicate " : "unsorted ", "id ", id,
          " at position ", i, " after ", (*out)[i - 1]));
    }
  }
  return absl::OkStatus();
}

std::vector<std::vector<uint32_t>> RowPositionsByShard(
    uint32_t table, absl::Span<const uint64_t> ids, int num_shards) {
  std::vector<std::vector<uint32_t>> out(num_shards);
  for (size_t i = 0; i < ids.size(); ++i) {
    out[RowShard(table, ids[i], num_shards)].push_back(
        static_cast<uint32_t>(i));
  }
  return out;
}

void DeduplicateIds(absl::Span<const uint64_t> ids,
                    std::vector<uint64_t>* unique,
                    std::vector<uint32_t>* local) {
  unique->assign(ids.begin(), ids.end());
  std::sort(unique->begin(), unique->end());
  unique->erase(std::unique(unique->begin(), unique->end()), unique->end());
  local->resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    (*local)[i] = static_cast<uint32_t>(
        std::lower_bound(unique->begin(), unique->end(), ids[i]) -
        unique->begin());
  }
}

std::string EncodeRowIds(absl::Span<const uint64_t> ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()),
                     ids.size() * 8);  // Little-endian host.
}

}  // namespace paramd
