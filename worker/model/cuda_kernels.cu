// The CUDA MLP's elementwise and reduction kernels. Matrix products are
// cuBLAS's (worker/model/cuda_mlp.cc).
#include <cuda_runtime.h>

#include "worker/model/cuda_kernels.h"

namespace paramd::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t count) {
  return static_cast<int>((count + kThreads - 1) / kThreads);
}

int LastError() { return static_cast<int>(cudaGetLastError()); }

__global__ void AddBiasKernel(float* out, const float* bias, int n, int m) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < static_cast<int64_t>(n) * m) out[i] += bias[i % m];
}

__global__ void ReluKernel(float* x, int64_t count) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) x[i] = fmaxf(x[i], 0.0f);
}

__global__ void ReluBackwardKernel(float* delta, const float* act,
                                   int64_t count) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < count && act[i] <= 0.0f) delta[i] = 0.0f;
}

// One thread per row: the classes are few (10 for Fashion-MNIST).
__global__ void SoftmaxXentKernel(const float* logits, const int32_t* labels,
                                  int n, int c, float* delta, float* loss) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n) return;
  const float* z = logits + static_cast<int64_t>(row) * c;
  float* d = delta + static_cast<int64_t>(row) * c;
  float zmax = z[0];
  for (int j = 1; j < c; ++j) zmax = fmaxf(zmax, z[j]);
  float sum = 0.0f;
  for (int j = 0; j < c; ++j) sum += (d[j] = expf(z[j] - zmax));
  const int y = labels[row];
  loss[row] = logf(sum) - (z[y] - zmax);
  const float scale = 1.0f / (sum * static_cast<float>(n));
  for (int j = 0; j < c; ++j) d[j] *= scale;
  d[y] -= 1.0f / static_cast<float>(n);
}

// One thread per column, summing down the rows in order.
__global__ void ColumnSumsKernel(const float* delta, int n, int m, float* db) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += delta[static_cast<int64_t>(i) * m + j];
  db[j] = s;
}

__global__ void SumKernel(const float* x, int n, float* sum) {
  __shared__ float partial[kThreads];
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  partial[threadIdx.x] = s;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *sum = partial[0];
}

__global__ void CountCorrectKernel(const float* logits, const int32_t* labels,
                                   int n, int c, unsigned int* correct) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n) return;
  const float* z = logits + static_cast<int64_t>(row) * c;
  int best = 0;
  for (int j = 1; j < c; ++j) {
    if (z[j] > z[best]) best = j;
  }
  if (best == labels[row]) atomicAdd(correct, 1u);
}

}  // namespace

int AddBias(float* out, const float* bias, int n, int m, void* stream) {
  const int64_t count = static_cast<int64_t>(n) * m;
  AddBiasKernel<<<Blocks(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      out, bias, n, m);
  return LastError();
}

int Relu(float* x, int64_t count, void* stream) {
  ReluKernel<<<Blocks(count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, count);
  return LastError();
}

int ReluBackward(float* delta, const float* act, int64_t count, void* stream) {
  ReluBackwardKernel<<<Blocks(count), kThreads, 0,
                       static_cast<cudaStream_t>(stream)>>>(delta, act, count);
  return LastError();
}

int SoftmaxXent(const float* logits, const int32_t* labels, int n, int c,
                float* delta, float* loss, void* stream) {
  SoftmaxXentKernel<<<Blocks(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, labels, n, c, delta, loss);
  return LastError();
}

int ColumnSums(const float* delta, int n, int m, float* db, void* stream) {
  ColumnSumsKernel<<<Blocks(m), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      delta, n, m, db);
  return LastError();
}

int Sum(const float* x, int n, float* sum, void* stream) {
  SumKernel<<<1, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(x, n, sum);
  return LastError();
}

int CountCorrect(const float* logits, const int32_t* labels, int n, int c,
                 unsigned int* correct, void* stream) {
  CountCorrectKernel<<<Blocks(n), kThreads, 0,
                       static_cast<cudaStream_t>(stream)>>>(logits, labels, n, c,
                                                           correct);
  return LastError();
}

}  // namespace paramd::cuda
