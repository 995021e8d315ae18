// DeviceOps: what a device backend does for the device layers
// (worker/model/device_layers.h) and DeviceSequential — memory, copies,
// matrix products and the kernels of worker/model/device_kernels.h — all
// enqueued in order on one queue, so that a layer's work is a sequence of
// calls and the host waits only where it reads a result (Mark, Finish).
//
// Two backends implement it: the CUDA one in the plugin (a stream, cuBLAS
// and kernels; worker/model/cuda_ops) and a host one that runs the same
// kernels in loops on the CPU (worker/model/host_ops.h), which the tests
// run against the CPU's layers on any machine. Pointers named "device" are
// the backend's memory; "host" ones are the program's. One instance is
// used by one thread at a time.
#ifndef PARAMD_WORKER_MODEL_DEVICE_OPS_H_
#define PARAMD_WORKER_MODEL_DEVICE_OPS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/model/device_kernels.h"

namespace paramd {

// Where a device's time goes, for benchmarks: filled while a backend is
// asked to profile (DeviceOps::Profile), in milliseconds of device time.
struct DeviceProfile {
  double gemm_ms = 0;    // Matrix products (cuBLAS).
  double kernel_ms = 0;  // The kernels of worker/model/device_kernels.h.
  double copy_ms = 0;    // Host to device and back.
  int64_t gemms = 0, kernels = 0, copies = 0;
};

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;

  // e.g. "cuda (NVIDIA H200, cuBLAS SGEMM, TF32 off)".
  virtual std::string Describe() const = 0;

  // Device memory, and host memory the device copies from and to at full
  // speed (pinned, for CUDA). Released by Free/FreeHost (null: nothing).
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  virtual void Free(void* device) = 0;
  virtual absl::StatusOr<void*> AllocateHost(size_t bytes) = 0;
  virtual void FreeHost(void* host) = 0;

  // Enqueued copies; the host memory must stay untouched until the queue
  // passes them (Mark/WaitMark, Finish).
  virtual absl::Status CopyToDevice(void* device, const void* host,
                                    size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host, const void* device,
                                  size_t bytes) = 0;

  // Row-major C = op(A) · op(B) + beta · C on device matrices, lda/ldb/ldc
  // the row-major row lengths (as cblas_sgemm with alpha 1).
  virtual absl::Status Gemm(bool trans_a, bool trans_b, int m, int n, int k,
                            const float* a, int lda, const float* b, int ldb,
                            float beta, float* c, int ldc) = 0;

  // f(i) for i in [0, count), one kernel per functor type.
#define PARAMD_DECLARE_LAUNCH(F) \
  virtual absl::Status Launch(const kernels::F& f, int64_t count) = 0;
  PARAMD_DEVICE_KERNELS(PARAMD_DECLARE_LAUNCH)
#undef PARAMD_DECLARE_LAUNCH

  // Mark(slot) notes the queue's present end; WaitMark(slot) blocks until
  // the queue has passed the slot's last mark. Slots are small integers.
  virtual absl::Status Mark(int slot) = 0;
  virtual absl::Status WaitMark(int slot) = 0;
  // Blocks until everything enqueued is done.
  virtual absl::Status Finish() = 0;

  // While `profile` is not null, the time of every operation is added to
  // it (read after Finish); null stops.
  virtual void Profile(DeviceProfile* profile) {}
};

// An array of T in a backend's device (or, with host = true, pinned host)
// memory, freed with it. Move-only.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(ops_, o.ops_);
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
    std::swap(host_, o.host_);
    return *this;
  }
  ~DeviceArray() {
    if (ptr_ == nullptr) return;
    if (host_) {
      ops_->FreeHost(ptr_);
    } else {
      ops_->Free(ptr_);
    }
  }

  static absl::StatusOr<DeviceArray> Make(DeviceOps* ops, size_t size,
                                          bool host = false) {
    DeviceArray a;
    a.ops_ = ops;
    a.host_ = host;
    const size_t bytes = (size > 0 ? size : 1) * sizeof(T);
    absl::StatusOr<void*> p =
        host ? ops->AllocateHost(bytes) : ops->Allocate(bytes);
    if (!p.ok()) return p.status();
    a.ptr_ = static_cast<T*>(*p);
    a.size_ = size;
    return a;
  }

  T* get() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  DeviceOps* ops_ = nullptr;
  T* ptr_ = nullptr;
  size_t size_ = 0;
  bool host_ = false;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_MODEL_DEVICE_OPS_H_
