// PARAMD_HOST_DEVICE marks a function that both the CPU and a CUDA device
// run: under nvcc it is __host__ __device__, elsewhere nothing. Functions
// so marked use nothing the device lacks (no allocation, no std::
// containers, no exceptions), so that one definition serves both.
#ifndef PARAMD_COMMON_BASE_HOST_DEVICE_H_
#define PARAMD_COMMON_BASE_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define PARAMD_HOST_DEVICE __host__ __device__
#else
#define PARAMD_HOST_DEVICE
#endif

#endif  // PARAMD_COMMON_BASE_HOST_DEVICE_H_
