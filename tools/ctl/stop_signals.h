// StopSignals: SIGINT and SIGTERM to paramctl, as bytes on a pipe (the
// self-pipe trick), so that the run's loop wakes for them in the same
// poll that waits for its children and stops the job in order.
#ifndef PARAMD_TOOLS_CTL_STOP_SIGNALS_H_
#define PARAMD_TOOLS_CTL_STOP_SIGNALS_H_

namespace paramd {

// Installs the handlers (once per process; later calls change nothing).
void InstallStopSignals();
// The pipe's read end, readable once a signal came; -1 before Install.
int StopSignalFd();
// The signal that came, taken off the pipe; 0 when none.
int TakeStopSignal();

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_STOP_SIGNALS_H_
