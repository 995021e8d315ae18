// Cancellation: a caller's "I gave up", told at once to work that waits on
// its behalf (a unary pull waiting for its version). The RPC layer cancels
// it when gRPC says the call was cancelled or its deadline passed; a wait
// registers what to do then instead of asking every so often.
//
// Thread-safe. Cancel runs the registered callbacks once, on the
// cancelling thread, with no lock held; a callback registered after
// Cancel runs at once.
#ifndef PARAMD_COMMON_BASE_CANCELLATION_H_
#define PARAMD_COMMON_BASE_CANCELLATION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace paramd {

class Cancellation {
 public:
  Cancellation() = default;
  Cancellation(const Cancellation&) = delete;
  Cancellation& operator=(const Cancellation&) = delete;

  // Cancels: every callback registered and not forgotten runs, once.
  // Later calls do nothing.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_) {
    std::map<uint64_t, std::function<void()>> callbacks;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return;
      cancelled_ = true;
      callbacks.swap(callbacks_);
    }
    for (auto& [id, callback] : callbacks) callback();
  }
  bool cancelled() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

  // Runs `callback` once when Cancel is called — here, at once, when it
  // was already (then returns 0). Otherwise returns an id for Forget.
  uint64_t OnCancel(std::function<void()> callback) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (!cancelled_) {
        const uint64_t id = next_id_++;
        callbacks_.emplace(id, std::move(callback));
        return id;
      }
    }
    callback();
    return 0;
  }
  // Takes callback `id` out, unless Cancel took it already: it may then
  // be running still, so a callback holds what it touches (a shared_ptr).
  void Forget(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    callbacks_.erase(id);
  }

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_CANCELLATION_H_
