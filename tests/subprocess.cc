#include "tests/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace paramd::testing {

Subprocess::Subprocess(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  fd_ = fds[0];
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) close(fd_);
}

bool Subprocess::ReadSome(absl::Duration timeout) {
  pollfd p = {fd_, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) <= 0) {
    return true;
  }
  char buf[4096];
  const ssize_t n = read(fd_, buf, sizeof(buf));
  if (n <= 0) return false;
  output_.append(buf, static_cast<size_t>(n));
  return true;
}

bool Subprocess::ReadUntil(const std::string& marker, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (output_.find(marker) == std::string::npos) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    if (!ReadSome(std::min(left, absl::Milliseconds(100)))) {
      return output_.find(marker) != std::string::npos;
    }
  }
  return true;
}

int Subprocess::Wait(absl::Duration timeout) {
  if (reaped_) return exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline && ReadSome(absl::Milliseconds(100))) {
  }
  // Its output ends a moment before the process can be reaped (a
  // process's files close before it exits): wait for the exit itself.
  (void)ProcessGone(pid_,
                    std::max(deadline - absl::Now(), absl::ZeroDuration()));
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) {
    kill(pid_, SIGKILL);  // Past the deadline: the test fails on the code.
    waitpid(pid_, &status, 0);
  }
  reaped_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_code_;
}

void Subprocess::Signal(int signo) {
  if (!reaped_) kill(pid_, signo);
}

std::string ListeningAddress(const Subprocess& server,
                             const std::string& host) {
  std::smatch m;
  const std::string& out = server.output();
  if (!std::regex_search(out, m, std::regex(R"(listening on port (\d+))"))) {
    return "";
  }
  return absl::StrCat(host, ":", m[1].str());
}

std::unique_ptr<Subprocess> StartServer(const std::string& job,
                                        std::string* address,
                                        const std::vector<std::string>& extra,
                                        absl::Duration timeout) {
  std::vector<std::string> argv = {
      "server/paramd-server", "--job", job, "--shard", "0", "--listen",
      "127.0.0.1:0"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto server = std::make_unique<Subprocess>(argv);
  INFO(server->output());
  REQUIRE(server->ReadUntil("listening on port", timeout));
  *address = ListeningAddress(*server);
  REQUIRE(!address->empty());
  return server;
}

std::unique_ptr<Subprocess> StartWorker(const std::string& job, int rank,
                                        const std::string& servers,
                                        const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {
      "worker/paramd-worker", "--job",     job,    "--rank",
      absl::StrCat(rank),     "--servers", servers};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return std::make_unique<Subprocess>(argv);
}

int RunCommand(const std::vector<std::string>& argv, std::string* output,
               absl::Duration timeout) {
  Subprocess p(argv);
  const int code = p.Wait(timeout);
  *output = p.output();
  return code;
}

bool ProcessGone(pid_t pid, absl::Duration timeout) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  // A pidfd turns readable when its process ends.
  pollfd p = {fd, POLLIN, 0};
  const int ready =
      poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
  close(fd);
  return ready == 1;
}

}  // namespace paramd::testing
