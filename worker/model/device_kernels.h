// The device layers' kernels (worker/model/device_layers.h) as functors: each
// computes element i of its output, `f(i)` for i in [0, count), with no
// state of its own beyond plain pointers and sizes. The CUDA backend runs
// them one thread per element (worker/model/cuda_launch.cu); the host
// backend of the tests (worker/model/host_ops.h) runs the same functors in
// a loop, so every index computation below is exercised on the CPU against
// the CPU's layers, on machines without a GPU too.
//
// Every sum runs in a fixed order (no atomics), so a kernel gives the same
// bits on every run. Activations are [n × size] floats, a sample's image
// in C×H×W order, as on the CPU (worker/model/cpu_layers.h).
//
// This header is compiled by nvcc as well as by the host compiler: plain
// C++, no standard containers, no Abseil.
#ifndef PARAMD_WORKER_MODEL_DEVICE_KERNELS_H_
#define PARAMD_WORKER_MODEL_DEVICE_KERNELS_H_

#include <cmath>
#include <cstdint>

#include "common/base/host_device.h"
#include "worker/model/batch_norm_kernels.h"
#include "worker/model/dropout_mask.h"

namespace paramd::kernels {

// The windows of a conv2d or pooling layer over one sample: c×h×w in,
// ho×wo per output channel, kernel k at `stride` with `pad` zeros around.
struct Windows {
  int c = 0, h = 0, w = 0;
  int ho = 0, wo = 0;
  int k = 1, stride = 1, pad = 0;
  int n = 0;  // Samples in the batch.
  PARAMD_HOST_DEVICE int64_t plane() const { return int64_t{ho} * wo; }
  PARAMD_HOST_DEVICE int64_t rows() const { return int64_t{c} * k * k; }
};

// out[i] = bias[i % m]: the bias broadcast over rows of m (before a
// product adds onto it, as the CPU's dense layer does).
struct BroadcastRows {
  const float* bias;
  float* out;
  int m;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const { out[i] = bias[i % m]; }
};

struct Relu {
  const float* in;
  float* out;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const float v = in[i];
    out[i] = v < 0.0f ? 0.0f : v;
  }
};

// din = dout where the forward output was positive.
struct ReluBackward {
  const float* out;
  const float* dout;
  float* din;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    din[i] = out[i] <= 0.0f ? 0.0f : dout[i];
  }
};

struct Copy {
  const float* src;
  float* dst;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const { dst[i] = src[i]; }
};

// Inverted dropout: dst = src ⊙ mask · scale, the mask DropoutKeeps' of
// (seed, sample i / size, element i % size).
struct Dropout {
  const float* src;
  float* dst;
  uint64_t seed;
  int64_t size;  // Elements per sample.
  double p;
  float scale;  // 1 / (1 - p).
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int sample = static_cast<int>(i / size);
    dst[i] = DropoutKeeps(seed, sample, i % size, p) ? src[i] * scale : 0.0f;
  }
};

// out[j] = Σ_r x[r · m + j] over r in [0, n), in row order: a dense
// layer's bias gradient.
struct ColumnSums {
  const float* x;
  int n, m;
  float* out;
  PARAMD_HOST_DEVICE void operator()(int64_t j) const {
    float s = 0.0f;
    for (int r = 0; r < n; ++r) s += x[int64_t{r} * m + j];
    out[j] = s;
  }
};

// The receptive fields of a batch as a matrix col [rows × n·P]: element
// (r, s·P + p) is sample s's input under kernel tap r = (c, ky, kx) for
// output position p = (oy, ox), zero in the padding.
struct Im2Col {
  const float* in;
  float* col;
  Windows g;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t plane = g.plane();
    const int64_t cols = g.n * plane;
    const int64_t r = i / cols, q = i % cols;
    const int64_t s = q / plane, p = q % plane;
    const int c = static_cast<int>(r / (g.k * g.k));
    const int ky = static_cast<int>(r / g.k % g.k),
              kx = static_cast<int>(r % g.k);
    const int oy = static_cast<int>(p / g.wo), ox = static_cast<int>(p % g.wo);
    const int iy = oy * g.stride - g.pad + ky, ix = ox * g.stride - g.pad + kx;
    const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
    col[i] = inside ? in[((s * g.c + c) * g.h + iy) * g.w + ix] : 0.0f;
  }
};

// The input gradient from d(col) [rows × n·P]: input element (s, c, iy,
// ix) sums the columns that read it, taps in (ky, kx) order.
struct Col2Im {
  const float* dcol;
  float* din;
  Windows g;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t plane = g.plane();
    const int64_t cols = g.n * plane;
    const int ix = static_cast<int>(i % g.w);
    const int iy = static_cast<int>(i / g.w % g.h);
    const int c = static_cast<int>(i / (int64_t{g.w} * g.h) % g.c);
    const int64_t s = i / (int64_t{g.w} * g.h * g.c);
    float sum = 0.0f;
    for (int ky = 0; ky < g.k; ++ky) {
      const int ty = iy + g.pad - ky;  // oy · stride
      if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.ho) continue;
      const int oy = ty / g.stride;
      for (int kx = 0; kx < g.k; ++kx) {
        const int tx = ix + g.pad - kx;
        if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.wo) continue;
        const int ox = tx / g.stride;
        const int64_t r = (int64_t{c} * g.k + ky) * g.k + kx;
        sum += dcol[r * cols + s * plane + int64_t{oy} * g.wo + ox];
      }
    }
    din[i] = sum;
  }
};

// [n × C × P] (a batch of images) to [C × n·P] (channel-major, what one
// matrix product for the whole batch reads and writes).
struct ToChannelMajor {
  const float* src;
  float* dst;
  int n, c;
  int64_t plane;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t cols = n * plane;
    const int64_t ch = i / cols, q = i % cols;
    const int64_t s = q / plane, p = q % plane;
    dst[i] = src[(s * c + ch) * plane + p];
  }
};

// The way back, adding bias[channel] when `bias` is not null.
struct FromChannelMajor {
  const float* src;
  const float* bias;
  float* dst;
  int n, c;
  int64_t plane;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t p = i % plane;
    const int64_t ch = i / plane % c;
    const int64_t s = i / (plane * c);
    const float v = src[ch * (n * plane) + s * plane + p];
    dst[i] = bias != nullptr ? v + bias[ch] : v;
  }
};

// A channel's sum in two launches, as the CPU's conv2d sums its bias
// gradient over its channel-major output gradient: each sample's plane in
// order, then the planes' sums in order. Every (channel, sample) pair has
// its thread; one thread per channel summing the whole batch serially (as
// before) grew with the batch and was most of the CNN's GPU step on an
// H200. The sums are the same, bit for bit.
//
// out[row · groups + g] = Σ x[row · len + g · group + j], j in [0, group)
// in order, for `groups` = len / group planes (one element per pair).
struct GroupSums {
  const float* x;
  int64_t len, group;
  float* out;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t groups = len / group;
    const int64_t row = i / groups, g = i % groups;
    const float* p = x + row * len + g * group;
    float s = 0.0f;
    for (int64_t j = 0; j < group; ++j) s += p[j];
    out[i] = s;
  }
};

// out[row] = Σ x[row · len + j], j in [0, len) in order (one element per
// row).
struct RowSums {
  const float* x;
  int64_t len;
  float* out;
  PARAMD_HOST_DEVICE void operator()(int64_t row) const {
    float s = 0.0f;
    for (int64_t j = 0; j < len; ++j) s += x[row * len + j];
    out[row] = s;
  }
};

// Max or mean over k×k windows at a stride (no padding), per output
// element; the max's place in its input plane goes to argmax.
struct PoolForward {
  const float* in;
  float* out;
  int32_t* argmax;  // Max pooling only.
  Windows g;
  bool max;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t plane = g.plane();
    const int64_t o = i % plane, pl = i / plane;  // pl: sample · C + channel
    const int oy = static_cast<int>(o / g.wo), ox = static_cast<int>(o % g.wo);
    const float* src = in + pl * g.h * g.w;
    float best = -3.402823466e38f, sum = 0.0f;
    int32_t at = 0;
    bool first = true;
    for (int ky = 0; ky < g.k; ++ky) {
      const int64_t row = int64_t{oy * g.stride + ky} * g.w + ox * g.stride;
      for (int kx = 0; kx < g.k; ++kx) {
        const float v = src[row + kx];
        if (first || v > best) {
          best = v;
          at = static_cast<int32_t>(row + kx);
          first = false;
        }
        sum += v;
      }
    }
    if (max) {
      out[i] = best;
      argmax[i] = at;
    } else {
      out[i] = sum * (1.0f / static_cast<float>(g.k * g.k));
    }
  }
};

// The input gradient of pooling, per input element: the sum over the
// windows that hold it of their gradient (max: where it was the window's
// maximum; mean: / k²), windows in (oy, ox) order.
struct PoolBackward {
  const float* dout;
  const int32_t* argmax;  // Max pooling only.
  float* din;
  Windows g;
  bool max;
  PARAMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t in_plane = int64_t{g.h} * g.w;
    const int64_t e = i % in_plane, pl = i / in_plane;
    const int iy = static_cast<int>(e / g.w), ix = static_cast<int>(e % g.w);
    // Windows oy with oy·stride ≤ iy < oy·stride + k.
    const int oy_lo = iy < g.k ? 0 : (iy - g.k) / g.stride + 1;
    const int oy_hi = iy / g.stride < g.ho - 1 ? iy / g.stride : g.ho - 1;
    const int ox_lo = ix < g.k ? 0 : (ix - g.k) / g.stride + 1;
    const int ox_hi = ix / g.stride < g.wo - 1 ? ix / g.stride : g.wo - 1;
    const float inv = 1.0f / static_cast<float>(g.k * g.k);
    const int64_t base = pl * g.plane();
    float sum = 0.0f;
    for (int oy = oy_lo; oy <= oy_hi; ++oy) {
      for (int ox = ox_lo; ox <= ox_hi; ++ox) {
        const int64_t o = base + int64_t{oy} * g.wo + ox;
        if (max) {
          if (argmax[o] == e) sum += dout[o];
        } else {
          sum += dout[o] * inv;
        }
      }
    }
    din[i] = sum;
  }
};

// Per row of logits [n × classes]: the sample's loss, and delta =
// (softmax − onehot(label)) / n. Labels are checked on the host first.
struct SoftmaxXent {
  const float* logits;
  const int32_t* labels;
  float* delta;
  double* loss;
  int n, classes;
  PARAMD_HOST_DEVICE void operator()(int64_t row) const {
    const float* z = logits + row * classes;
    float* d = delta + row * classes;
    float zmax = z[0];
    for (int j = 1; j < classes; ++j) zmax = z[j] > zmax ? z[j] : zmax;
    float sum = 0.0f;
    for (int j = 0; j < classes; ++j) sum += (d[j] = expf(z[j] - zmax));
    const int y = labels[row];
    loss[row] = logf(sum) - (z[y] - zmax);
    const float inv_n = 1.0f / static_cast<float>(n);
    const float inv_sum = 1.0f / sum;
    for (int j = 0; j < classes; ++j) d[j] *= inv_sum * inv_n;
    d[y] -= inv_n;
  }
};

// Per row: 1 when the largest logit (the first of equals) is the label's.
struct Correct {
  const float* logits;
  const int32_t* labels;
  double* correct;
  int classes;
  PARAMD_HOST_DEVICE void operator()(int64_t row) const {
    const float* z = logits + row * classes;
    int best = 0;
    for (int j = 1; j < classes; ++j) best = z[j] > z[best] ? j : best;
    correct[row] = best == labels[row] ? 1.0 : 0.0;
  }
};

// One element: *out (+)= Σ x[0, n) in order (a batch's loss, its correct
// count).
struct Sum {
  const double* x;
  int n;
  double* out;
  bool accumulate;
  PARAMD_HOST_DEVICE void operator()(int64_t) const {
    double s = accumulate ? *out : 0.0;
    for (int j = 0; j < n; ++j) s += x[j];
    *out = s;
  }
};

}  // namespace paramd::kernels

// Every functor above and batch norm's (worker/model/batch_norm_kernels.h),
// for the launchers and backends that list them.
#define PARAMD_DEVICE_KERNELS(X)                                 \
  X(BroadcastRows)                                               \
  X(Relu)                                                        \
  X(ReluBackward)                                                \
  X(Copy)                                                        \
  X(Dropout) X(ColumnSums) X(Im2Col) X(Col2Im) X(ToChannelMajor) \
      X(FromChannelMajor) X(GroupSums) X(RowSums) X(PoolForward) \
          X(PoolBackward) X(BatchNormPartial) X(BatchNormMean)   \
              X(BatchNormTrainStats) X(BatchNormEvalStats)       \
                  X(BatchNormNormalize) X(BatchNormGrads)        \
                      X(BatchNormInputGrad) X(SoftmaxXent) X(Correct) X(Sum)

#endif  // PARAMD_WORKER_MODEL_DEVICE_KERNELS_H_
