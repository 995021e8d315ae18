// Process-wide settings for paramd's long-running binaries, made once at
// the top of main.
#ifndef PARAMD_COMMON_BASE_PROCESS_SETUP_H_
#define PARAMD_COMMON_BASE_PROCESS_SETUP_H_

namespace paramd {

// - Keeps large blocks in the heap: glibc otherwise maps every block over
//   its threshold fresh from the OS and a message buffer then pays a page
//   fault per 4 KiB on first touch (~10% of a training run's CPU time).
// - Turns off Abseil's mutex deadlock detection, a debugging aid that
//   costs a graph lookup on every lock.
// - EnableFlushToZero, before any thread starts (threads inherit it).
// - ChooseGrpcPoller.
void SetUpProcess();

// Makes gRPC poll each completion queue's own connections (its "poll"
// engine) instead of one poller for the whole process ("epoll1", the
// default on Linux), which wakes whichever thread polls and hands each
// event on to the thread whose queue it is for: 1.6-2.4x the round trips
// of 4 KB-1 MB steps with servers and workers in one process, 1.4-2.3x by
// the socket (docs/performance-history.md, "One poller per queue"). With it, gRPC's
// backup poller runs every 100 ms, not 5 s, so that a connection no call
// polls (a channel reconnecting while its calls fail fast) still makes
// progress. Before gRPC starts (its first channel or server); values set
// in the environment (GRPC_POLL_STRATEGY,
// GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS) are kept.
void ChooseGrpcPoller();

// Treats denormal floats as zero in this thread and the threads it starts
// from now on. Momentum buffers of parameters whose gradient stays zero
// (dead ReLU units) decay into the denormal range after ~800 steps, and
// every operation on a denormal costs ~100 cycles: async training fell from
// ~25k to ~10k samples/s after its first epoch (docs/performance-history.md).
// Values below 1.2e-38 carry nothing for training.
void EnableFlushToZero();

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_PROCESS_SETUP_H_
