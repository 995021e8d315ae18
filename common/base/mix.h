// SplitMix64's finaliser, and the random numbers paramd derives from it.
//
// Initial values, row placement, hashed features and the synthetic click
// log are all counter-based: value i is Mix of a key and i, so any element
// computes on its own and every process agrees.
#ifndef PARAMD_COMMON_BASE_MIX_H_
#define PARAMD_COMMON_BASE_MIX_H_

#include <cmath>
#include <cstdint>

#include "common/base/host_device.h"

namespace paramd {

// Also on a CUDA device (dropout masks are drawn there too).
PARAMD_HOST_DEVICE inline uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A standard normal from one 64-bit hash: Box-Muller over two 24-bit
// uniforms (the first in (0, 1], so the log is finite).
inline double NormalFromBits(uint64_t bits) {
  const double u1 = (static_cast<double>(bits >> 40) + 1) / 16777216.0;
  const double u2 = static_cast<double>((bits >> 8) & 0xFFFFFF) / 16777216.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
}

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_MIX_H_
