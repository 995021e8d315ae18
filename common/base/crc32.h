// CRC-32 (zlib's, the polynomial of gzip and PNG) of a byte string of any
// length: what checkpoints and exports end their files with.
#ifndef PARAMD_COMMON_BASE_CRC32_H_
#define PARAMD_COMMON_BASE_CRC32_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace paramd {

uint32_t Crc32(absl::string_view bytes);

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_CRC32_H_
