// ServerWatch on a fake timeline: a running server silent for longer than
// the lease is reported; an answer, a restart or not running resets or
// pauses the count.
#include "tools/ctl/server_watch.h"

#include <catch2/catch.hpp>
#include <vector>

namespace paramd {
namespace {

TEST_CASE("a running server silent past the lease is reported, once per start",
          "[paramctl][server_watch]") {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  ServerWatch watch(2, absl::Seconds(5));
  watch.Started(0, t0);
  watch.Started(1, t0);
  const std::vector<bool> both = {true, true};
  // Server 1 answers at 3 s, then falls silent; server 0 answers throughout.
  CHECK(watch.Observe({true, true}, both, t0 + absl::Seconds(3)).empty());
  CHECK(watch.Observe({true, false}, both, t0 + absl::Seconds(8)).empty());
  CHECK(watch.Silence(1, t0 + absl::Seconds(8)) == absl::Seconds(5));
  CHECK(watch.Observe({true, false}, both, t0 + absl::Seconds(8.5)) ==
        std::vector<int>{1});
  // Killed and restarted: its silence counts from the restart.
  watch.Started(1, t0 + absl::Seconds(9));
  CHECK(watch.Observe({true, false}, both, t0 + absl::Seconds(13)).empty());
  CHECK(watch.Observe({true, false}, both, t0 + absl::Seconds(14.5)) ==
        std::vector<int>{1});
  // A server that is not running (dead, waiting for its restart) is not
  // reported however long it is silent.
  CHECK(watch.Observe({true, false}, {true, false}, t0 + absl::Seconds(60))
            .empty());
}

}  // namespace
}  // namespace paramd
