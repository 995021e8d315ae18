// The BLAS a worker would load on this machine (worker.blas_core: auto),
// for tests of the CPU layers: the test fails if none loads.
#ifndef PARAMD_TESTS_TEST_BLAS_H_
#define PARAMD_TESTS_TEST_BLAS_H_

#include "worker/model/blas.h"

namespace paramd::testing {

const Blas* TheBlas();

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_TEST_BLAS_H_
