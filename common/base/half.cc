#include "common/base/half.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

namespace paramd {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Round-to-nearest-even conversion of a value that fits (|x| <= 65504, or
// not finite).
uint16_t ToHalfUnsaturated(float value) {
  const uint32_t x = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // Inf or NaN; NaN keeps a quiet payload bit.
    return sign | 0x7c00u | (abs > 0x7f800000u ? 0x0200u : 0u);
  }
  if (abs < 0x38800000u) {  // Under 2^-14: subnormal half or zero.
    // Scale so that the half's subnormal unit (2^-24) becomes 1, and let
    // the FPU round to nearest even.
    const float scaled = FromBits(abs) * 16777216.0f;  // 2^24
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits.
  uint32_t h = (abs >> 13) - ((127 - 15) << 10);
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

__attribute__((target("f16c,avx"))) int64_t ToHalvesF16c(
    absl::Span<const float> in, absl::Span<uint16_t> out) {
  const __m256 max = _mm256_set1_ps(kHalfMax);
  const __m256 min = _mm256_set1_ps(-kHalfMax);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 inf = _mm256_set1_ps(INFINITY);
  int64_t saturated = 0;
  size_t i = 0;
  for (; i + 8 <= in.size(); i += 8) {
    const __m256 x = _mm256_loadu_ps(in.data() + i);
    const __m256 abs = _mm256_and_ps(x, abs_mask);
    // Finite and beyond the range: saturate. NaN compares false.
    const __m256 over = _mm256_and_ps(_mm256_cmp_ps(abs, max, _CMP_GT_OQ),
                                      _mm256_cmp_ps(abs, inf, _CMP_LT_OQ));
    saturated += __builtin_popcount(_mm256_movemask_ps(over));
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(x, min), max);
    const __m256 y = _mm256_blendv_ps(x, clamped, over);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.data() + i),
                     _mm256_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < in.size(); ++i) {
    const float v = in[i];
    if (std::isfinite(v) && std::fabs(v) > kHalfMax) {
      ++saturated;
      out[i] = ToHalfUnsaturated(std::copysign(kHalfMax, v));
    } else {
      out[i] = ToHalfUnsaturated(v);
    }
  }
  return saturated;
}

__attribute__((target("f16c,avx"))) void ToFloatsF16c(
    absl::Span<const uint16_t> in, absl::Span<float> out) {
  size_t i = 0;
  for (; i + 8 <= in.size(); i += 8) {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(in.data() + i));
    _mm256_storeu_ps(out.data() + i, _mm256_cvtph_ps(h));
  }
  for (; i < in.size(); ++i) out[i] = HalfToFloat(in[i]);
}

bool DetectF16c() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
}

}  // namespace

uint16_t FloatToHalf(float value) {
  if (std::isfinite(value) && std::fabs(value) > kHalfMax) {
    value = std::copysign(kHalfMax, value);
  }
  return ToHalfUnsaturated(value);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // Zero or subnormal: mantissa × 2^-24, exact.
    const float v = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exponent == 0x1f) {  // Inf or NaN (quiet, as F16C makes it).
    return FromBits(sign | 0x7f800000u | (mantissa << 13) |
                    (mantissa != 0 ? 0x00400000u : 0u));
  }
  return FromBits(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

bool HalfUsesF16c() {
  static const bool f16c = DetectF16c();
  return f16c;
}

int64_t FloatsToHalvesPortable(absl::Span<const float> in,
                               absl::Span<uint16_t> out) {
  int64_t saturated = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    saturated += std::isfinite(in[i]) && std::fabs(in[i]) > kHalfMax;
    out[i] = FloatToHalf(in[i]);
  }
  return saturated;
}

void HalvesToFloatsPortable(absl::Span<const uint16_t> in,
                            absl::Span<float> out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = HalfToFloat(in[i]);
}

int64_t FloatsToHalves(absl::Span<const float> in, absl::Span<uint16_t> out) {
  if (HalfUsesF16c()) return ToHalvesF16c(in, out);
  return FloatsToHalvesPortable(in, out);
}

void HalvesToFloats(absl::Span<const uint16_t> in, absl::Span<float> out) {
  if (HalfUsesF16c()) {
    ToFloatsF16c(in, out);
  } else {
    HalvesToFloatsPortable(in, out);
  }
}

}  // namespace paramd
