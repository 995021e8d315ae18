// IEEE 754 binary16 ("half") conversions for gradients on the wire
// (`compression: {type: fp16}`).
//
// To half: round to nearest, ties to even; subnormal halves are produced
// for magnitudes under 2^-14 (down to 2^-24; smaller round to ±0).
// Finite values beyond half's range (|x| > 65504) SATURATE to ±65504 and
// are counted, never turned into infinity: a gradient that large is kept
// as large as half can say. NaN and ±Inf stay NaN and ±Inf, so that a
// server refuses them as it refuses non-finite float32 gradients.
// To float: exact. Uses the CPU's F16C instructions when it has them (same
// results, checked by tests); a portable path otherwise.
#ifndef PARAMD_COMMON_BASE_HALF_H_
#define PARAMD_COMMON_BASE_HALF_H_

#include <cstdint>

#include "absl/types/span.h"

namespace paramd {

inline constexpr float kHalfMax = 65504.0f;

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);

// Converts `in` into `out` (same size); returns how many finite values
// were beyond half's range and saturated.
int64_t FloatsToHalves(absl::Span<const float> in, absl::Span<uint16_t> out);
void HalvesToFloats(absl::Span<const uint16_t> in, absl::Span<float> out);

// The same with the portable code only, for tests.
int64_t FloatsToHalvesPortable(absl::Span<const float> in,
                               absl::Span<uint16_t> out);
void HalvesToFloatsPortable(absl::Span<const uint16_t> in,
                            absl::Span<float> out);

// Whether the fast paths run on this CPU.
bool HalfUsesF16c();

// Whether a half is NaN or ±Inf.
inline bool HalfIsFinite(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_HALF_H_
