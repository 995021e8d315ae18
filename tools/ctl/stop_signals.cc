#include "tools/ctl/stop_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

namespace paramd {
namespace {

int signal_pipe[2] = {-1, -1};

void OnSignal(int signo) {
  const char c = static_cast<char>(signo);
  (void)!write(signal_pipe[1], &c, 1);
}

}  // namespace

void InstallStopSignals() {
  if (signal_pipe[0] >= 0) return;
  if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int StopSignalFd() { return signal_pipe[0]; }

int TakeStopSignal() {
  char c = 0;
  return signal_pipe[0] >= 0 && read(signal_pipe[0], &c, 1) == 1 ? c : 0;
}

}  // namespace paramd
