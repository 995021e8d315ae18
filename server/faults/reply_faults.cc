#include "server/faults/reply_faults.h"

#include "absl/strings/str_cat.h"

namespace paramd {

ReplyFaults::ReplyFaults(const TestingConfig& testing, uint64_t seed)
    : max_delay_ms_(testing.delay_reply_ms),
      drop_probability_(testing.drop_reply_probability),
      random_(seed != 0 ? seed : std::random_device{}()) {}

ReplyFaults::Fate ReplyFaults::Draw(const char* rpc) const {
  Fate fate;
  if (!enabled()) return fate;
  int delay_ms = 0;
  bool drop = false;
  {
    absl::MutexLock lock(&mu_);
    delay_ms = std::uniform_int_distribution<int>(0, max_delay_ms_)(random_);
    drop = std::uniform_real_distribution<double>(0, 1)(random_) <
           drop_probability_;
  }
  fate.delay = absl::Milliseconds(delay_ms);
  if (drop) {
    fate.lost = absl::UnavailableError(
        absl::StrCat(rpc,
                     ": reply dropped on purpose "
                     "(testing.drop_reply_probability); the request "
                     "was handled"));
  }
  return fate;
}

}  // namespace paramd
