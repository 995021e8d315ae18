#include "worker/retry.h"

#include <algorithm>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace paramd {
namespace {

bool NoServer(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

}  // namespace

absl::StatusOr<uint64_t> Retry(
    const char* what, const RetryOptions& options,
    const std::function<absl::StatusOr<uint64_t>()>& attempt) {
  std::optional<std::mt19937_64> random;
  absl::Time first_failure = absl::InfiniteFuture();
  absl::Duration backoff = kFirstBackoff;
  for (int tries = 1;; ++tries) {
    absl::StatusOr<uint64_t> result = attempt();
    if (NoServer(result.status()) && options.fail_over && options.fail_over()) {
      result = attempt();
    }
    if (!NoServer(result.status())) {
      if (tries > 1 && result.ok()) {
        spdlog::info("{}: {} went through after {} tries", options.who, what,
                     tries);
      }
      return result;
    }
    const absl::Time now = options.clock->Now();
    if (first_failure == absl::InfiniteFuture()) {
      first_failure = now;
      spdlog::warn("{}: {}; retrying for up to {} s", options.who,
                   std::string(result.status().message()),
                   absl::ToDoubleSeconds(options.give_up));
    }
    if (now - first_failure >= options.give_up) {
      return absl::Status(
          result.status().code(),
          absl::StrCat(
              "gave up after ", tries, " tries in ",
              absl::ToInt64Seconds(now - first_failure),
              " s (liveness.give_up_seconds): ", result.status().message()));
    }
    if (!random.has_value()) {
      random.emplace(options.seed != 0 ? options.seed : std::random_device{}());
    }
    // Full jitter in [backoff / 2, backoff], doubling up to kMaxBackoff.
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    options.clock->SleepUntil(now + backoff * jitter(*random));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

absl::Status CancelledByServer(const absl::Status& s) {
  if (!absl::IsCancelled(s)) return s;
  return absl::UnavailableError(
      absl::StrCat(s.message(), " (the server ended the call)"));
}

absl::Status PrefixStatus(const absl::Status& s, const char* what, int shard) {
  return absl::Status(s.code(), absl::StrCat(what, shard, ": ", s.message()));
}

}  // namespace paramd
