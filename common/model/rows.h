// Embedding-table rows: which shard owns a row, a row's initial values,
// and the checks every row-id list must pass.
//
// Every process derives both from (seed, table, row) alone, so workers and
// servers agree without talking, and a row nobody pushed yet needs no
// storage: its value is InitRow's.
#ifndef PARAMD_COMMON_MODEL_ROWS_H_
#define PARAMD_COMMON_MODEL_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/config/job_config.h"

namespace paramd {

// The shard in [0, num_shards) that owns row `row` of table `table`: a
// 64-bit mix of both, reduced by multiply-shift (no modulo bias to speak
// of: shards differ by less than 2^-32 in share).
int RowShard(uint32_t table, uint64_t row, int num_shards);

// Writes the initial values of row `row` of table `table` (config.dim
// floats) into `out`: normal(0, init_scale), uniform(±init_scale) or
// zeros, each element a pure function of (seed, table, row, element).
void InitRow(const EmbeddingTableConfig& config, uint64_t seed, uint32_t table,
             uint64_t row, absl::Span<float> out);

// Decodes little-endian uint64 ids (RowBlock.ids) into `out`, checking
// they are a whole number of ids, strictly ascending and below `rows`.
// Errors start with `what`, e.g. "Push: rows of table 'pixels'".
absl::Status DecodeRowIds(absl::string_view bytes, uint64_t rows,
                          const std::string& what, std::vector<uint64_t>* out);

// For each shard, the positions in `ids` of the rows it owns, in order.
std::vector<std::vector<uint32_t>> RowPositionsByShard(
    uint32_t table, absl::Span<const uint64_t> ids, int num_shards);

// A batch's `ids` de-duplicated: `*unique` gets them sorted and distinct
// (what to pull and push), local[i] the place of ids[i] in it.
void DeduplicateIds(absl::Span<const uint64_t> ids,
                    std::vector<uint64_t>* unique,
                    std::vector<uint32_t>* local);

// The little-endian bytes of `ids` (RowBlock.ids).
std::string EncodeRowIds(absl::Span<const uint64_t> ids);

}  // namespace paramd

#endif  // PARAMD_COMMON_MODEL_ROWS_H_
