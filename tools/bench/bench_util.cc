#include "tools/bench/bench_util.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace paramd {

double Since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

absl::StatusOr<std::vector<int64_t>> ParseSizes(const std::string& flag,
                                                const std::string& text) {
  std::vector<int64_t> sizes;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t unit = 1;
    if (!part.empty()) {
      switch (part.back()) {
        case 'K':
        case 'k':
          unit = int64_t{1} << 10;
          break;
        case 'M':
        case 'm':
          unit = int64_t{1} << 20;
          break;
        case 'G':
        case 'g':
          unit = int64_t{1} << 30;
          break;
        default:
          break;
      }
      if (unit != 1) part.remove_suffix(1);
    }
    int64_t n = 0;
    if (!absl::SimpleAtoi(part, &n) || n <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", std::string(part),
                       "' is not a positive size (e.g. 4K, 16M)"));
    }
    sizes.push_back(n * unit);
  }
  if (sizes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": no sizes"));
  }
  return sizes;
}

std::string SizeName(int64_t n) {
  if (n >= (1 << 20) && n % (1 << 20) == 0) return absl::StrCat(n >> 20, "M");
  if (n >= (1 << 10) && n % (1 << 10) == 0) return absl::StrCat(n >> 10, "K");
  return absl::StrCat(n);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i =
      std::min(v.size() - 1,
               static_cast<size_t>(p / 100.0 * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace paramd
