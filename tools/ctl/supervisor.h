// Supervisor: runs child processes, streams their output line by line with
// a prefix, and notices when they exit. Used by `paramctl run`.
//
// Children run in their own process group and get SIGTERM if paramctl
// dies (PR_SET_PDEATHSIG), so none outlives it. Not thread-safe: one
// thread drives it through Poll().
#ifndef PARAMD_TOOLS_CTL_SUPERVISOR_H_
#define PARAMD_TOOLS_CTL_SUPERVISOR_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace paramd {

struct ChildInfo {
  std::string name;  // e.g. "server 0"
  pid_t pid = -1;
  bool running = false;
  int wait_status = 0;  // As from waitpid, once exited.
  // Its peak resident set (wait4's ru_maxrss), once Poll saw it exit.
  int64_t peak_rss_bytes = -1;
  std::string last_line;  // The last line it printed.
};

class Supervisor {
 public:
  Supervisor() = default;
  ~Supervisor();  // Kills whatever still runs.

  // Starts argv[0] with arguments; returns the child's index.
  absl::StatusOr<int> Spawn(const std::string& name,
                            const std::vector<std::string>& argv);

  // Forwards output and reaps exits for up to `timeout`, returning early
  // when a child exits or `wake_fd` (if >= 0) becomes readable. Returns the
  // indices of children that exited during this call.
  std::vector<int> Poll(absl::Duration timeout, int wake_fd = -1);

  // SIGTERM to every running child, then SIGKILL to those still running
  // after `grace`; forwards their last output.
  void StopAll(absl::Duration grace);
  // As StopAll, for the children whose index is in `which`.
  void Stop(const std::vector<int>& which, absl::Duration grace);

  const ChildInfo& child(int i) const { return children_[i].info; }
  int size() const { return static_cast<int>(children_.size()); }

  // "exited with status 1" / "killed by signal 9 (Killed)".
  static std::string DescribeExit(int wait_status);

 private:
  struct Child {
    ChildInfo info;
    int fd = -1;          // Read end of its stdout+stderr pipe.
    std::string partial;  // Output not yet ended by a newline.
  };
  void Drain(Child& c, bool flush);
  void Emit(Child& c, const std::string& line);

  std::vector<Child> children_;
};

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_SUPERVISOR_H_
