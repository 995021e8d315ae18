// Jobs under `paramctl run` disturbed at a random step: a signal to one of
// its servers in the middle of an epoch, and the epoch figures paramctl
// printed, to compare with an undisturbed run's.
#ifndef PARAMD_TESTS_DISTURBED_RUNS_H_
#define PARAMD_TESTS_DISTURBED_RUNS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace paramd::testing {

// How long a test's job may run.
constexpr absl::Duration kJobTimeout = absl::Minutes(4);

// Every "epoch E/N  train loss L  test accuracy A" line paramctl printed.
std::vector<std::string> EpochFigures(const std::string& output);

// A rank's per-epoch figures from its own log, without the rates: "epoch
// 1/2: train loss 1.2345, test accuracy 0.6789", one a line.
std::string RankEpochFigures(const std::string& log);

// Runs `job` (whose rank 1 is slowed, testing.slow_rank); once rank 1
// reported epoch `epoch`, and up to ~0.5 s more (a random point of the
// next epoch), sends `signal` to `victim` ("server 0", "backup 1").
// Returns paramctl's output after a clean end, every process it started
// gone.
std::string Disturbed(const std::string& job, const std::string& victim,
                      int signal, int epoch);

// Runs `job` to its clean end; paramctl's output.
std::string Undisturbed(const std::string& job);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_DISTURBED_RUNS_H_
