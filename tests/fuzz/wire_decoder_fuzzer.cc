// libFuzzer target: the hand-written Push and Pull decoders against
// protobuf's parser (tests/wire_differential.h). The first byte chooses
// the message (even: PushRequest, odd: PullResponse) and where the rest is
// cut into segments; any disagreement aborts with what differs.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/wire_differential.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const absl::string_view bytes(reinterpret_cast<const char*>(data + 1),
                                size - 1);
  std::vector<size_t> cuts;
  if (!bytes.empty()) {
    // Up to three cuts, spread by the control byte's upper bits.
    const int n = (control >> 1) & 3;
    for (int i = 1; i <= n; ++i) {
      cuts.push_back((bytes.size() * i * (1 + (control >> 3))) / 33 %
                     bytes.size());
    }
    std::sort(cuts.begin(), cuts.end());
  }
  const std::string diff = (control & 1)
                               ? paramd::testing::ComparePull(bytes, cuts)
                               : paramd::testing::ComparePush(bytes, cuts);
  if (!diff.empty()) {
    std::fprintf(stderr, "decoders disagree: %s\n", diff.c_str());
    std::abort();
  }
  return 0;
}
