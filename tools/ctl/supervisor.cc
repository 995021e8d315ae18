#include "tools/ctl/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace paramd {

Supervisor::~Supervisor() { StopAll(absl::Seconds(2)); }

absl::StatusOr<int> Supervisor::Spawn(const std::string& name,
                                      const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Child: own process group (Ctrl-C reaches paramctl only, which stops
    // children in order), die with the parent, output into the pipe.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "cannot execute %s: %s\n", args[0],
                 std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  Child c;
  c.info.name = name;
  c.info.pid = pid;
  c.info.running = true;
  c.fd = fds[0];
  fcntl(c.fd, F_SETFL, fcntl(c.fd, F_GETFL) | O_NONBLOCK);
  children_.push_back(std::move(c));
  return static_cast<int>(children_.size()) - 1;
}

void Supervisor::Emit(Child& c, const std::string& line) {
  std::printf("[%s] %s\n", c.info.name.c_str(), line.c_str());
  if (!line.empty()) c.info.last_line = line;
}

void Supervisor::Drain(Child& c, bool flush) {
  if (c.fd >= 0) {
    char buf[65536];
    while (true) {
      const ssize_t n = read(c.fd, buf, sizeof(buf));
      if (n > 0) {
        c.partial.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {  // Every writer closed: the child is gone.
        close(c.fd);
        c.fd = -1;
      }
      break;  // EAGAIN: nothing more for now.
    }
    size_t start = 0;
    for (size_t nl; (nl = c.partial.find('\n', start)) != std::string::npos;
         start = nl + 1) {
      Emit(c, c.partial.substr(start, nl - start));
    }
    c.partial.erase(0, start);
  }
  if (flush && !c.partial.empty()) {
    Emit(c, c.partial);
    c.partial.clear();
  }
  std::fflush(stdout);
}

std::vector<int> Supervisor::Poll(absl::Duration timeout, int wake_fd) {
  std::vector<pollfd> fds;
  std::vector<int> owner;
  for (int i = 0; i < size(); ++i) {
    if (children_[i].fd >= 0) {
      fds.push_back({children_[i].fd, POLLIN, 0});
      owner.push_back(i);
    }
  }
  if (wake_fd >= 0) {
    fds.push_back({wake_fd, POLLIN, 0});
    owner.push_back(-1);
  }
  poll(fds.data(), fds.size(),
       static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  for (size_t k = 0; k < fds.size(); ++k) {
    if (owner[k] >= 0 && fds[k].revents != 0) Drain(children_[owner[k]], false);
  }
  std::vector<int> exited;
  for (int i = 0; i < size(); ++i) {
    Child& c = children_[i];
    if (!c.info.running) continue;
    int status = 0;
    struct rusage usage {};
    if (wait4(c.info.pid, &status, WNOHANG, &usage) == c.info.pid) {
      c.info.running = false;
      c.info.wait_status = status;
      c.info.peak_rss_bytes = int64_t{usage.ru_maxrss} * 1024;
      Drain(c, true);
      exited.push_back(i);
    }
  }
  return exited;
}

void Supervisor::Stop(const std::vector<int>& which, absl::Duration grace) {
  for (int i : which) {
    if (children_[i].info.running) kill(children_[i].info.pid, SIGTERM);
  }
  const absl::Time deadline = absl::Now() + grace;
  auto any_running = [&] {
    for (int i : which) {
      if (children_[i].info.running) return true;
    }
    return false;
  };
  while (any_running() && absl::Now() < deadline) {
    Poll(absl::Milliseconds(50));
  }
  for (int i : which) {
    Child& c = children_[i];
    if (!c.info.running) continue;
    kill(c.info.pid, SIGKILL);
    waitpid(c.info.pid, &c.info.wait_status, 0);
    c.info.running = false;
    Drain(c, true);
  }
}

void Supervisor::StopAll(absl::Duration grace) {
  std::vector<int> all;
  for (int i = 0; i < size(); ++i) all.push_back(i);
  Stop(all, grace);
}

std::string Supervisor::DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) {
    return absl::StrCat("exited with status ", WEXITSTATUS(wait_status));
  }
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat("killed by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ")");
  }
  return "stopped";
}

}  // namespace paramd
