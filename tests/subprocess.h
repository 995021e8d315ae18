// A child process for end-to-end tests: started with a pipe on its stdout
// and stderr, read until a marker appears or it exits, always bounded by a
// deadline. The destructor kills and reaps it if it still runs.
#ifndef PARAMD_TESTS_SUBPROCESS_H_
#define PARAMD_TESTS_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace paramd::testing {

class Subprocess {
 public:
  explicit Subprocess(const std::vector<std::string>& argv);
  ~Subprocess();

  // Reads output until it contains `marker`; false at EOF or `timeout`.
  bool ReadUntil(const std::string& marker, absl::Duration timeout);
  // Reads everything until the process exits (or `timeout`, then kills it)
  // and returns its exit code (128 + signal when killed by one).
  int Wait(absl::Duration timeout);

  void Signal(int signo);
  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }

 private:
  // Reads what is available within `timeout`; false at EOF.
  bool ReadSome(absl::Duration timeout);

  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  int exit_code_ = -1;
  std::string output_;
};

// The address a paramd-server listens on, from its "listening on port N"
// line ("HOST:N", `host` the one it listens at); empty before that line.
std::string ListeningAddress(const Subprocess& server,
                             const std::string& host = "127.0.0.1");

// paramd-server for shard 0 of `job` on a free port of 127.0.0.1, with
// `extra` flags; returns once it listens, its address in `address`
// (fails the test when it does not within `timeout`).
std::unique_ptr<Subprocess> StartServer(
    const std::string& job, std::string* address,
    const std::vector<std::string>& extra = {},
    absl::Duration timeout = absl::Seconds(90));

// paramd-worker rank `rank` of `job` against the servers at `servers`
// (comma-separated), with `extra` flags.
std::unique_ptr<Subprocess> StartWorker(
    const std::string& job, int rank, const std::string& servers,
    const std::vector<std::string>& extra = {});

// Runs argv to completion (bounded by `timeout`); returns the exit code and
// fills `output` with stdout and stderr.
int RunCommand(const std::vector<std::string>& argv, std::string* output,
               absl::Duration timeout = absl::Minutes(2));

// True when the process with this pid has ended (exited, or a zombie no
// one reaped yet) or is gone, waiting for that up to `timeout` (on a pidfd,
// no polling): a process just sent SIGKILL may take a moment to end.
bool ProcessGone(pid_t pid, absl::Duration timeout = absl::Seconds(10));

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_SUBPROCESS_H_
