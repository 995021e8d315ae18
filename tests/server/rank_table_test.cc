// The update policy's rank table on its own: the exactly-once rule (a
// rank's last accepted push, kept when it joins past it), the live set,
// the slowest live clock, and a checkpoint's part restored only when it
// fits.
#include "server/policy/rank_table.h"

#include <catch2/catch.hpp>

namespace paramd {
namespace {

TEST_CASE("a rank's last accepted push is its retry until it moves on",
          "[policy][ranks]") {
  RankTable ranks(2);
  CHECK_FALSE(ranks.IsLastAccepted(0, 0));  // nothing accepted yet
  ranks.Accepted(0, 0, /*staleness=*/1, /*dropped=*/false);
  CHECK(ranks.IsLastAccepted(0, 0));
  CHECK_FALSE(ranks.IsLastAccepted(1, 0));
  CHECK(ranks[0].clock == 1);
  ranks.Accepted(0, 1, /*staleness=*/3, /*dropped=*/true);
  CHECK_FALSE(ranks.IsLastAccepted(0, 0));  // only the last one
  CHECK(ranks.IsLastAccepted(0, 1));
  CHECK(ranks[0].clock == 2);
  CHECK(ranks[0].accepted == 2);
  CHECK(ranks[0].dropped == 1);
  CHECK(ranks[0].staleness_sum == 4);
  CHECK(ranks[0].last_staleness == 3);
  // Clocks past what a signed record holds are never a retry.
  CHECK_FALSE(ranks.IsLastAccepted(0, UINT64_MAX));
}

TEST_CASE("joining past the last accepted push keeps it recognisable",
          "[policy][ranks]") {
  RankTable ranks(1);
  ranks.Accepted(0, 4, 1, false);
  REQUIRE(ranks.Leave(0));
  CHECK_FALSE(ranks.Leave(0));  // not live any more
  ranks.Join(0, 5);
  CHECK(ranks[0].live);
  CHECK(ranks.IsLastAccepted(0, 4));  // its retry is still a duplicate
  ranks.Join(0, 4);                   // at or below it: pushed anew
  CHECK_FALSE(ranks.IsLastAccepted(0, 4));
  CHECK(ranks[0].clock == 4);
}

TEST_CASE("the slowest live clock skips ranks that left and the one asked",
          "[policy][ranks]") {
  RankTable ranks(3);
  ranks.Accepted(0, 0, 1, false);
  ranks.Accepted(0, 1, 1, false);  // rank 0 at 2
  ranks.Accepted(1, 0, 1, false);  // rank 1 at 1, rank 2 at 0
  CHECK(ranks.SlowestLive() == 0);
  CHECK(ranks.SlowestLive(/*except=*/2) == 1);
  CHECK(ranks.Largest() == 2);
  REQUIRE(ranks.Leave(2));
  CHECK(ranks.SlowestLive() == 1);
  CHECK(ranks.Live([](int) { return true; }) == std::vector<int>{0, 1});
  REQUIRE(ranks.Leave(0));
  REQUIRE(ranks.Leave(1));
  CHECK(ranks.SlowestLive() == UINT64_MAX);  // nobody live
  CHECK(ranks.Largest() == 2);               // left ranks keep their clock
  CHECK(RankTable::List({}) == "-");
  CHECK(RankTable::List({1, 3}) == "1, 3");
}

TEST_CASE("a checkpoint's part is restored only onto as many ranks",
          "[policy][ranks]") {
  RankTable ranks(2);
  ranks.Accepted(1, 0, 1, false);
  REQUIRE(ranks.Leave(0));
  PolicyState state;
  ranks.Save(&state);
  CHECK(state.clocks == std::vector<uint64_t>{0, 1});
  CHECK(state.last_accepted == std::vector<int64_t>{-1, 0});
  CHECK(state.live == std::vector<bool>{false, true});

  RankTable restored(2);
  REQUIRE(restored.Restore(state).ok());
  CHECK(restored[1].clock == 1);
  CHECK(restored.IsLastAccepted(1, 0));
  CHECK(restored[0].live);  // who is live is not a checkpoint's

  RankTable other(3);
  const absl::Status s = other.Restore(state);
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(s.message() == "the checkpoint has 2 workers; the job has 3");
  CHECK(other[1].clock == 0);  // nothing taken
}

}  // namespace
}  // namespace paramd
