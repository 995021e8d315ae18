// Launchers for the CUDA MLP's kernels (worker/model/cuda_kernels.cu), on plain
// device pointers. Each enqueues on `stream` and returns the launch's
// cudaError_t (as int, so that this header needs no CUDA headers).
#ifndef PARAMD_WORKER_MODEL_CUDA_KERNELS_H_
#define PARAMD_WORKER_MODEL_CUDA_KERNELS_H_

#include <cstdint>

namespace paramd::cuda {

// out[i, j] += bias[j] for an n × m row-major out.
int AddBias(float* out, const float* bias, int n, int m, void* stream);
// x = max(x, 0), count elements.
int Relu(float* x, int64_t count, void* stream);
// delta = act > 0 ? delta : 0.
int ReluBackward(float* delta, const float* act, int64_t count, void* stream);
// Row-wise softmax cross-entropy of logits [n × c] with labels: writes each
// sample's loss and delta = (softmax - onehot) / n.
int SoftmaxXent(const float* logits, const int32_t* labels, int n, int c,
                float* delta, float* loss, void* stream);
// db[j] = sum_i delta[i, j] for an n × m row-major delta.
int ColumnSums(const float* delta, int n, int m, float* db, void* stream);
// *sum = sum of x[0..n) (one block; n up to a few thousand).
int Sum(const float* x, int n, float* sum, void* stream);
// *correct += number of rows whose largest logit is at their label.
int CountCorrect(const float* logits, const int32_t* labels, int n, int c,
                 unsigned int* correct, void* stream);

}  // namespace paramd::cuda

#endif  // PARAMD_WORKER_MODEL_CUDA_KERNELS_H_
