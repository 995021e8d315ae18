#include "worker/rpc/step_queue.h"

#include <grpc/support/time.h>

namespace paramd {

StepQueue::~StepQueue() {
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) static_cast<Tag*>(tag)->Done(ok);
}

bool StepQueue::Poll(absl::Time until) {
  void* tag;
  bool ok;
  gpr_timespec deadline;
  if (until == absl::InfiniteFuture()) {
    deadline = gpr_inf_future(GPR_CLOCK_REALTIME);
  } else if (until <= absl::UnixEpoch()) {
    deadline = gpr_inf_past(GPR_CLOCK_REALTIME);
  } else {
    const timespec t = absl::ToTimespec(until);
    deadline = {t.tv_sec, static_cast<int32_t>(t.tv_nsec), GPR_CLOCK_REALTIME};
  }
  switch (cq_.AsyncNext(&tag, &ok, deadline)) {
    case grpc::CompletionQueue::GOT_EVENT:
      static_cast<Tag*>(tag)->Done(ok);
      return true;
    case grpc::CompletionQueue::TIMEOUT:
    case grpc::CompletionQueue::SHUTDOWN:
      return false;
  }
  return false;
}

void StepQueue::Drain() {
  while (Poll(absl::InfinitePast())) {
  }
}

}  // namespace paramd
