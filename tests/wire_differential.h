// Differential check of the hand-written Push/Pull decoders
// (common/wire/wire_format.h) against protobuf's own parser: for the same bytes
// both must accept or both refuse, and when both accept they must read the
// same fields and chunk bytes. Shared by wire_differential_test and a
// fuzz target.
#ifndef PARAMD_TESTS_WIRE_DIFFERENTIAL_H_
#define PARAMD_TESTS_WIRE_DIFFERENTIAL_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace paramd::testing {

// Empty when the decoders agree on `bytes` split at `cuts` (offsets into
// `bytes`, ascending); otherwise what differs.
std::string ComparePush(absl::string_view bytes,
                        const std::vector<size_t>& cuts);
std::string ComparePull(absl::string_view bytes,
                        const std::vector<size_t>& cuts);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_WIRE_DIFFERENTIAL_H_
