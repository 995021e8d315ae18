#include "worker/parameter_client.h"

#include "common/status_macros.h"

namespace paramd {

absl::StatusOr<uint64_t> RegisterInTwoPhases(
    const std::function<absl::StatusOr<uint64_t>(bool join, uint64_t clock)>&
        phase) {
  // Each shard may move on between the phases; a few tries always settle.
  constexpr int kAttempts = 20;
  absl::Status last;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    ASSIGN_OR_RETURN(uint64_t proposed, phase(false, 0));
    absl::StatusOr<uint64_t> joined = phase(true, proposed);
    if (joined.ok() || !absl::IsAborted(joined.status())) return joined;
    last = joined.status();
  }
  return last;
}

}  // namespace paramd
