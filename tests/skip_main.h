// For tests that need programs from outside the build (promtool, Slurm's
// daemons, kubectl): link :skip_main instead of :catch_main and define
// SkipReason(). When it returns a reason the test runs nothing and prints
// "SKIPPED: N test cases: <reason>" (scripts/test.sh counts them as
// skipped, never as passed); otherwise Catch2 runs as usual.
#ifndef PARAMD_TESTS_SKIP_MAIN_H_
#define PARAMD_TESTS_SKIP_MAIN_H_

#include <string>
#include <vector>

namespace paramd::testing {

// Defined by each test that links :skip_main; empty: run.
std::string SkipReason();

// The path of `program` on PATH, /usr/bin or /usr/sbin; empty if none.
std::string FindProgram(const std::string& program);

// "needs X, Y (not installed; scripts/test.sh installs them)" for those of
// `programs` not found; empty when all are there.
std::string MissingPrograms(const std::vector<std::string>& programs);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_SKIP_MAIN_H_
