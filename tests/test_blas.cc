#include "tests/test_blas.h"

#include <catch2/catch.hpp>

namespace paramd::testing {

const Blas* TheBlas() {
  absl::StatusOr<const Blas*> blas = LoadBlas("auto");
  INFO(blas.status().ToString());
  REQUIRE(blas.ok());
  return *blas;
}

}  // namespace paramd::testing
