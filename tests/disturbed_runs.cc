#include "tests/disturbed_runs.h"

#include <signal.h>

#include <catch2/catch.hpp>
#include <random>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/paramctl_runs.h"
#include "tests/subprocess.h"

namespace paramd::testing {

std::vector<std::string> EpochFigures(const std::string& output) {
  std::vector<std::string> out;
  const std::regex line(
      R"(paramctl: (epoch \d+/\d+  train loss [0-9.]+  test accuracy [0-9.]+))");
  for (std::sregex_iterator it(output.begin(), output.end(), line), end;
       it != end; ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

std::string RankEpochFigures(const std::string& log) {
  static const std::regex kEpoch(
      R"(epoch \d+/\d+: train loss [0-9.]+, test accuracy [0-9.]+)");
  std::string figures;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), kEpoch);
       it != std::sregex_iterator(); ++it) {
    absl::StrAppend(&figures, it->str(), "\n");
  }
  return figures;
}

std::string Disturbed(const std::string& job, const std::string& victim,
                      int signal, int epoch) {
  Subprocess run(ParamctlRunArgs(job));
  REQUIRE(
      run.ReadUntil(absl::StrCat("rank 1: epoch ", epoch, "/"), kJobTimeout));
  std::mt19937 random(std::random_device{}());
  // Rank 1 takes 25 ms a step: up to ~0.5 s into the next epoch.
  const absl::Time until =
      absl::Now() + absl::Milliseconds(static_cast<int>(random() % 500));
  while (absl::Now() < until) {
  }
  const pid_t pid = PidOf(run.output(), victim);
  REQUIRE(pid > 0);
  REQUIRE(kill(pid, signal) == 0);
  const int code = run.Wait(kJobTimeout);
  INFO(run.output());
  REQUIRE(code == 0);
  for (pid_t p : StartedPids(run.output())) CHECK(ProcessGone(p));
  return run.output();
}

std::string Undisturbed(const std::string& job) {
  Subprocess run(ParamctlRunArgs(job));
  const int code = run.Wait(kJobTimeout);
  INFO(run.output());
  REQUIRE(code == 0);
  return run.output();
}

}  // namespace paramd::testing
