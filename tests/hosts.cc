#include "tests/hosts.h"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/skip_main.h"
#include "tests/subprocess.h"

namespace paramd::testing {
namespace {

constexpr char kScript[] = "scripts/hosts.sh";

// A set name of this process's own: parallel tests never share one.
std::string SetName(const char* prefix) {
  return absl::StrCat(prefix, getpid() % 100000);
}

// The name of this process's next set: its letter changes with each, so
// that a set made right after another is removed never meets what the
// kernel has not finished removing of it (a veth of the old set's name:
// "File exists").
std::string NextSetName() {
  static std::atomic<int> made{0};
  static constexpr char kLetters[] = "tuvwxyz";
  const char letter[2] = {kLetters[made++ % (sizeof(kLetters) - 1)], '\0'};
  return SetName(letter);
}

}  // namespace

std::string TestHosts::SkipReason() {
  if (geteuid() != 0) return "needs root to make network namespaces";
  if (std::string missing = MissingPrograms({"ip", "tc", "unshare"});
      !missing.empty()) {
    return missing;
  }
  const std::string probe = SetName("p");
  std::string output;
  const int up = RunCommand({kScript, "up", probe, "1"}, &output);
  std::string ignored;
  RunCommand({kScript, "down", probe}, &ignored);
  if (up != 0) {
    return absl::StrCat("cannot make a network namespace here: ",
                        absl::StripAsciiWhitespace(output));
  }
  return "";
}

TestHosts::TestHosts(int n, const std::string& rate) : name_(NextSetName()) {
  std::string output;
  RunCommand({kScript, "down", name_}, &output);  // A dead test's leftovers.
  const int up =
      RunCommand({kScript, "up", name_, absl::StrCat(n), rate}, &output);
  INFO(output);
  REQUIRE(up == 0);
  addresses_ = absl::StrSplit(absl::StripAsciiWhitespace(output), '\n');
  REQUIRE(addresses_.size() == static_cast<size_t>(n));
}

TestHosts::~TestHosts() {
  std::string output;
  RunCommand({kScript, "down", name_}, &output);
}

std::vector<std::string> TestHosts::On(
    int k, const std::vector<std::string>& argv) const {
  std::vector<std::string> on = {kScript, "run", name_, absl::StrCat(k)};
  on.insert(on.end(), argv.begin(), argv.end());
  return on;
}

void TestHosts::Cut(int j, int k) const { Partition("cut", j, k); }

void TestHosts::Heal(int j, int k) const { Partition("heal", j, k); }

void TestHosts::Partition(const char* verb, int j, int k) const {
  std::string output;
  const int code = RunCommand(
      {kScript, verb, name_, absl::StrCat(j), absl::StrCat(k)}, &output);
  INFO(output);
  REQUIRE(code == 0);
}

std::string TestHosts::Launch() const {
  return absl::StrCat(kScript, " run ", name_, " {host}");
}

}  // namespace paramd::testing
