// Cancellation: a caller's cancel told once to every wait registered on
// it, at once to one registered after, and never to one forgotten.
#include "common/base/cancellation.h"

#include <catch2/catch.hpp>
#include <vector>

namespace paramd {
namespace {

TEST_CASE("cancel runs each registered callback once", "[cancellation]") {
  Cancellation cancel;
  std::vector<int> ran;
  const uint64_t a = cancel.OnCancel([&] { ran.push_back(1); });
  const uint64_t b = cancel.OnCancel([&] { ran.push_back(2); });
  CHECK(a != 0);
  CHECK(b != a);
  CHECK_FALSE(cancel.cancelled());
  CHECK(ran.empty());
  cancel.Cancel();
  CHECK(cancel.cancelled());
  CHECK(ran == std::vector<int>{1, 2});
  cancel.Cancel();  // once only
  CHECK(ran == std::vector<int>{1, 2});
  cancel.Forget(a);  // after it ran: nothing to take out
}

TEST_CASE("a callback registered after the cancel runs at once",
          "[cancellation]") {
  Cancellation cancel;
  cancel.Cancel();
  bool ran = false;
  CHECK(cancel.OnCancel([&] { ran = true; }) == 0);
  CHECK(ran);
}

TEST_CASE("a forgotten callback never runs", "[cancellation]") {
  Cancellation cancel;
  int ran = 0;
  const uint64_t kept = cancel.OnCancel([&] { ran += 1; });
  const uint64_t gone = cancel.OnCancel([&] { ran += 10; });
  cancel.Forget(gone);
  cancel.Cancel();
  CHECK(ran == 1);
  CHECK(kept != gone);
}

}  // namespace
}  // namespace paramd
