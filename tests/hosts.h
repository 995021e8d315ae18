// Simulated hosts for tests, made by scripts/hosts.sh: network namespaces,
// each with its own address and its own /dev/shm, on a bridge of their
// own, links optionally shaped to a rate. A test that uses them links
// :skip_main and skips with TestHosts::SkipReason() where they cannot be
// made (not root, no iproute2, no namespaces).
#ifndef PARAMD_TESTS_HOSTS_H_
#define PARAMD_TESTS_HOSTS_H_

#include <string>
#include <vector>

namespace paramd::testing {

class TestHosts {
 public:
  // Why hosts cannot be made on this machine; empty when they can (tried:
  // one host is made and removed).
  static std::string SkipReason();

  // `n` hosts (0..n-1), every link at `rate` ("none": unshaped; else a tc
  // rate such as 100mbit); fails the test when they cannot be made.
  explicit TestHosts(int n, const std::string& rate = "none");
  // Ends every process still on them and removes them.
  ~TestHosts();
  TestHosts(const TestHosts&) = delete;
  TestHosts& operator=(const TestHosts&) = delete;

  // Host k's address (no port).
  const std::string& address(int k) const { return addresses_.at(k); }
  // `argv` as run on host `k` (for Subprocess): the same program, exec'd
  // in the host's network and with its /dev/shm.
  std::vector<std::string> On(int k,
                              const std::vector<std::string>& argv) const;
  // On's prefix with "{host}" for the host's index: paramd-bench's
  // --server_launch.
  std::string Launch() const;
  // A partition between hosts `j` and `k` (scripts/hosts.sh cut), and its
  // end; each fails the test when hosts.sh does.
  void Cut(int j, int k) const;
  void Heal(int j, int k) const;

 private:
  // hosts.sh `verb` ("cut", "heal") between hosts `j` and `k`.
  void Partition(const char* verb, int j, int k) const;

  std::string name_;
  std::vector<std::string> addresses_;
};

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_HOSTS_H_
