// IEEE half conversions (common/base/half.h): exact values, rounding,
// subnormals, infinities, NaN, saturation, and F16C against the portable code.
#include "common/base/half.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace paramd {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST_CASE("half: exact values and the format's landmarks", "[half]") {
  CHECK(FloatToHalf(0.0f) == 0x0000);
  CHECK(FloatToHalf(-0.0f) == 0x8000);
  CHECK(FloatToHalf(1.0f) == 0x3c00);
  CHECK(FloatToHalf(-2.0f) == 0xc000);
  CHECK(FloatToHalf(65504.0f) == 0x7bff);                 // Largest finite.
  CHECK(FloatToHalf(6.103515625e-05f) == 0x0400);         // Smallest normal.
  CHECK(FloatToHalf(5.9604644775390625e-08f) == 0x0001);  // Smallest subnormal.
  CHECK(HalfToFloat(0x0001) == 5.9604644775390625e-08f);
  CHECK(HalfToFloat(0x03ff) == 6.09755516052246094e-05f);  // Largest subnormal.
  CHECK(HalfToFloat(0x7bff) == 65504.0f);
  CHECK(HalfToFloat(0x3555) == 0.333251953125f);
}

TEST_CASE("half: every half survives the round trip exactly", "[half]") {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      CHECK(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    INFO(h);
    REQUIRE(FloatToHalf(f) == h);
  }
}

TEST_CASE("half: rounding is to nearest, ties to even, within half an ulp",
          "[half]") {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  CHECK(FloatToHalf(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  // 1 + 3 × 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: even (0x3c02).
  CHECK(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) ==
        0x3c01);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exponent(-24, 15.9f);
  for (int i = 0; i < 200000; ++i) {
    const float v = std::ldexp(1.0f, 0) * std::exp2(exponent(rng)) *
                    (rng() % 2 ? 1.0f : -1.0f);
    const float back = HalfToFloat(FloatToHalf(v));
    // Half an ulp: 2^-11 relative for normals, 2^-25 absolute below.
    const float bound = std::fabs(v) >= 6.103515625e-05f
                            ? std::fabs(v) * std::ldexp(1.0f, -11)
                            : std::ldexp(1.0f, -25);
    INFO(v);
    REQUIRE(std::fabs(back - v) <= bound);
  }
}

TEST_CASE("half: subnormals round, tiny values go to signed zero", "[half]") {
  CHECK(FloatToHalf(3 * std::ldexp(1.0f, -25)) == 0x0002);  // 1.5 ulp: even.
  CHECK(FloatToHalf(std::ldexp(1.0f, -25)) == 0x0000);      // Half ulp: even.
  CHECK(FloatToHalf(std::ldexp(1.0f, -26)) == 0x0000);
  CHECK(FloatToHalf(-std::ldexp(1.0f, -30)) == 0x8000);
  CHECK(FloatToHalf(1e-40f) == 0x0000);  // A float subnormal.
}

TEST_CASE("half: beyond the range saturates and is counted; Inf and NaN stay",
          "[half]") {
  CHECK(FloatToHalf(65520.0f) == 0x7bff);
  CHECK(FloatToHalf(1e30f) == 0x7bff);
  CHECK(FloatToHalf(-3.4e38f) == 0xfbff);
  CHECK(FloatToHalf(kInf) == 0x7c00);
  CHECK(FloatToHalf(-kInf) == 0xfc00);
  CHECK_FALSE(HalfIsFinite(FloatToHalf(std::nanf(""))));
  CHECK(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
  CHECK(std::isinf(HalfToFloat(0x7c00)));
  CHECK(HalfIsFinite(0x7bff));
  const std::vector<float> in = {1.0f,     7e4f, -1e9f,     kInf, std::nanf(""),
                                 65504.0f, 2.0f, -70000.0f, 3.0f};
  std::vector<uint16_t> out(in.size());
  CHECK(FloatsToHalves(in, absl::MakeSpan(out)) == 3);
  CHECK(out[1] == 0x7bff);
  CHECK(out[2] == 0xfbff);
  CHECK(out[3] == 0x7c00);
  CHECK_FALSE(HalfIsFinite(out[4]));
  CHECK(out[7] == 0xfbff);
  CHECK(FloatsToHalvesPortable(in, absl::MakeSpan(out)) == 3);
}

TEST_CASE("half: the F16C path equals the portable one", "[half]") {
  if (!HalfUsesF16c()) {
    WARN("this CPU has no F16C: only the portable path runs");
  }
  std::mt19937 rng(11);
  std::vector<float> in(100003);
  for (float& v : in) {
    uint32_t bits = static_cast<uint32_t>(rng());
    std::memcpy(&v, &bits, sizeof(v));  // Every kind of float, NaN included.
  }
  in[5] = kInf;
  in[6] = 1e30f;
  std::vector<uint16_t> fast(in.size()), portable(in.size());
  CHECK(FloatsToHalves(in, absl::MakeSpan(fast)) ==
        FloatsToHalvesPortable(in, absl::MakeSpan(portable)));
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(in[i])) {
      REQUIRE_FALSE(HalfIsFinite(fast[i]));
      REQUIRE((fast[i] & 0x3ff) != 0);
      continue;
    }
    INFO(in[i]);
    REQUIRE(fast[i] == portable[i]);
  }
  std::vector<uint16_t> halves(70001);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = i & 0xffff;
  std::vector<float> a(halves.size()), b(halves.size());
  HalvesToFloats(halves, absl::MakeSpan(a));
  HalvesToFloatsPortable(halves, absl::MakeSpan(b));
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace
}  // namespace paramd
