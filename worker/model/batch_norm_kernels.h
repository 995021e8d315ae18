// Batch norm's kernels (worker/model/device_layers.h, the batch_norm layer)
// as functors, like the other device kernels (worker/model/device_kernels.h,
// which includes this and lists them): the per-channel sums in fixed
// slices, the batch's statistics and the running ones' pushed change, the
// normalisation, and the gradients of γ, β and the input. Every sum runs
// in a fixed order, in double, so a kernel gives the same bits on every run.
//
// Compiled by nvcc as well as by the host compiler: plain C++, no standard
// containers, no Abseil.
#ifndef PARAMD_WORKER_MODEL_BATCH_NORM_KERNELS_H_
#define PARAMD_WORKER_MODEL_BATCH_NORM_KERNELS_H_

#include <cmath>
#include <cstdint>

#include "common/base/host_device.h"

namespace paramd::kernels {

// Batch norm's per-channel sums, in two steps so that every thread sums a
// fixed slice in order: BatchNormPartial sums slice s of channel ch's
// n·plane values into partial[ch · slices + s] (in double); a finishing
// functor sums the slices. What is summed, of a = the first operand and
// b = the second at the same place:
enum class BatchNormSum {
  kValue,      // a
  kDeviation,  // (a - center[ch])²
  kProduct,    // a · b
};

struct BatchNormPartial {
  const float* a;
  const float* b;        // kProduct only.
  const double* center;  // kDeviation only: per channel.
  double* partial;
  BatchNormSum what;
  int c, n, slices;
  int64_t plane;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int ch = static_cast<int>(i / slices),
              s = static_cast<int>(i % slices);
    const int64_t m = n * plane;
    const int64_t per = (m + slices - 1) / slices;
    const int64_t begin = s * per;
    const int64_t end = begin + per < m ? begin + per : m;
    double sum = 0;
    for (int64_t j = begin; j < end; ++j) {
      const int64_t at = (j / plane * c + ch) * plane + j % plane;
      const double v = a[at];
      if (what == BatchNormSum::kValue) {
        sum += v;
      } else if (what == BatchNormSum::kDeviation) {
        sum += (v - center[ch]) * (v - center[ch]);
      } else {
        sum +=
            static_cast<double>(a[at] * b[at]);  // As the CPU: a float product.
      }
    }
    partial[i] = sum;
  }
};

// Σ of a channel's slices, in order.
PARAMD_HOST_DEVICE inline double SumSlices(const double* partial, int slices,
                                           int64_t ch) {
  double sum = 0;
  for (int s = 0; s < slices; ++s) sum += partial[ch * slices + s];
  return sum;
}

// Per channel: the batch mean, from kValue partials over m values.
struct BatchNormMean {
  const double* partial;
  double* mean;
  int slices;
  int64_t m;
  PARAMD_HOST_DEVICE void operator()(int64_t ch) const {
    mean[ch] = SumSlices(partial, slices, ch) / static_cast<double>(m);
  }
};

// Per channel, training: the batch variance from kDeviation partials,
// what the normalisation uses (mean as float, 1/sqrt(var + eps)), and the
// running statistics' change the step pushes: momentum × (the batch's
// mean, and unbiased variance, minus the running values in params).
struct BatchNormTrainStats {
  const double* partial;
  const double* mean;
  const float* running_mean;
  const float* running_var;
  float* fmean;
  float* inv_std;
  float* stat_delta;  // [2C]: the mean's change, then the variance's.
  int c, slices;
  int64_t m;
  float momentum;
  double eps;
  PARAMD_HOST_DEVICE void operator()(int64_t ch) const {
    const double sq = SumSlices(partial, slices, ch);
    const double var = sq / static_cast<double>(m);
    const double unbiased = m > 1 ? sq / static_cast<double>(m - 1) : var;
    stat_delta[ch] = momentum * static_cast<float>(mean[ch] - running_mean[ch]);
    stat_delta[c + ch] =
        momentum * static_cast<float>(unbiased - running_var[ch]);
    fmean[ch] = static_cast<float>(mean[ch]);
    inv_std[ch] = static_cast<float>(1.0 / sqrt(var + eps));
  }
};

// Per channel, evaluating: the running statistics in their place.
struct BatchNormEvalStats {
  const float* running_mean;
  const float* running_var;
  float* fmean;
  float* inv_std;
  double eps;
  PARAMD_HOST_DEVICE void operator()(int64_t ch) const {
    fmean[ch] = running_mean[ch];
    inv_std[ch] = static_cast<float>(
        1.0 / sqrt(static_cast<double>(running_var[ch]) + eps));
  }
};

// out = γ · x̂ + β with x̂ = (in - mean) · inv_std, kept when xhat is not
// null (training).
struct BatchNormNormalize {
  const float* in;
  float* out;
  float* xhat;
  const float* fmean;
  const float* inv_std;
  const float* gamma;
  const float* beta;
  int c;
  int64_t plane;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t ch = i / plane % c;
    const float xh = (in[i] - fmean[ch]) * inv_std[ch];
    if (xhat != nullptr) xhat[i] = xh;
    out[i] = gamma[ch] * xh + beta[ch];
  }
};

// Per channel, from the partials of dout (kValue) and dout · x̂
// (kProduct): γ's and β's gradients, the statistics' pushed change, and
// the two means the input gradient needs.
struct BatchNormGrads {
  const double* dbeta_partial;
  const double* dgamma_partial;
  const float* stat_delta;
  float* dgamma;
  float* dbeta;
  float* dmean;
  float* dvar;
  float* mean_dy;   // [C]
  float* mean_dyx;  // [C]
  int c, slices;
  int64_t m;
  PARAMD_HOST_DEVICE void operator()(int64_t ch) const {
    const double db = SumSlices(dbeta_partial, slices, ch);
    const double dg = SumSlices(dgamma_partial, slices, ch);
    dgamma[ch] = static_cast<float>(dg);
    dbeta[ch] = static_cast<float>(db);
    dmean[ch] = stat_delta[ch];
    dvar[ch] = stat_delta[c + ch];
    mean_dy[ch] = static_cast<float>(db / static_cast<double>(m));
    mean_dyx[ch] = static_cast<float>(dg / static_cast<double>(m));
  }
};

// dx = γ/σ · (dy − mean(dy) − x̂ · mean(dy · x̂)).
struct BatchNormInputGrad {
  const float* dout;
  const float* xhat;
  float* din;
  const float* gamma;
  const float* inv_std;
  const float* mean_dy;
  const float* mean_dyx;
  int c;
  int64_t plane;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t ch = i / plane % c;
    const float scale = gamma[ch] * inv_std[ch];
    din[i] = scale * (dout[i] - mean_dy[ch] - xhat[i] * mean_dyx[ch]);
  }
};

}  // namespace paramd::kernels

#endif  // PARAMD_WORKER_MODEL_BATCH_NORM_KERNELS_H_
