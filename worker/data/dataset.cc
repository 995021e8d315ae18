#include "worker/data/dataset.h"

#include <algorithm>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "worker/data/idx_reader.h"

namespace paramd {

void Dataset::Gather(const int64_t* indices, int n, float* x,
                     int32_t* y) const {
  constexpr float kScale = 1.0f / 255.0f;
  for (int i = 0; i < n; ++i) {
    const uint8_t* src = pixels.data() + indices[i] * dim;
    float* dst = x + static_cast<int64_t>(i) * dim;
    for (int64_t j = 0; j < dim; ++j) dst[j] = src[j] * kScale;
    y[i] = labels[indices[i]];
  }
}

absl::StatusOr<Dataset> LoadDataset(const std::string& images_path,
                                    const std::string& labels_path,
                                    int64_t limit, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("LoadDataset: rank ", rank, " of ", world));
  }
  ASSIGN_OR_RETURN(IdxArray images,
                   ReadIdxShare(images_path, limit, rank, world));
  // Labels are read whole (a byte per sample): the classes are the split's.
  ASSIGN_OR_RETURN(IdxArray labels, ReadIdxShare(labels_path, limit, 0, 1));
  if (images.dims.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, ": expected [N, rows, cols] images"));
  }
  if (labels.dims.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": expected [N] labels"));
  }
  if (images.dims[0] != labels.dims[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path, " holds ", images.dims[0], " images but ",
                     labels_path, " holds ", labels.dims[0], " labels"));
  }
  Dataset d;
  d.full_size = images.rows;
  d.rank = rank;
  d.world = world;
  d.dim = 1;
  for (size_t i = 1; i < images.dims.size(); ++i) d.dim *= images.dims[i];
  if (images.dims.size() == 3) {
    d.height = static_cast<int>(images.dims[1]);
    d.width = static_cast<int>(images.dims[2]);
  } else {
    d.height = 1;
    d.width = static_cast<int>(d.dim);
  }
  d.size = d.dim > 0 ? static_cast<int64_t>(images.data.size()) / d.dim : 0;
  d.pixels = std::move(images.data);
  for (uint8_t l : labels.data) d.num_classes = std::max(d.num_classes, l + 1);
  d.labels.resize(d.size);
  for (int64_t i = 0; i < d.size; ++i) {
    d.labels[i] = labels.data[i * world + rank];
  }
  return d;
}

absl::StatusOr<DataPartition> DataPartition::Create(const Dataset* data,
                                                    int rank, int world,
                                                    int batch_size) {
  const int64_t smallest = data->full_size / world;
  if (smallest < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the dataset's ", data->full_size, " samples cannot feed ",
                     world, " workers"));
  }
  std::vector<int64_t> order;
  if (data->world == world && data->rank == rank) {
    // The dataset holds just this share, in the share's order.
    for (int64_t i = 0; i < data->size; ++i) order.push_back(i);
  } else if (data->world == 1) {
    for (int64_t i = rank; i < data->size; i += world) order.push_back(i);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataPartition: the dataset holds rank ", data->rank, " of ",
        data->world, "'s share, not rank ", rank, " of ", world, "'s"));
  }
  const int64_t steps = (smallest + batch_size - 1) / batch_size;
  return DataPartition(data, rank, std::move(order), batch_size, steps);
}

DataPartition::DataPartition(const Dataset* data, int rank,
                             std::vector<int64_t> order, int batch_size,
                             int64_t steps)
    : data_(data),
      rank_(rank),
      natural_(order),
      order_(std::move(order)),
      batch_size_(batch_size),
      steps_per_epoch_(steps) {
  max_batch_ = static_cast<int>(std::max<int64_t>(
      batch_size_, size() - (steps_per_epoch_ - 1) * batch_size_));
}

void DataPartition::StartEpoch(uint64_t seed, int epoch, bool shuffle) {
  order_ = natural_;
  if (!shuffle) return;
  std::seed_seq seq{static_cast<uint32_t>(seed),
                    static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(epoch), static_cast<uint32_t>(rank_)};
  std::mt19937_64 gen(seq);
  // Fisher–Yates with an explicit draw, so the order does not depend on the
  // standard library's shuffle algorithm.
  for (int64_t i = size() - 1; i > 0; --i) {
    const int64_t j =
        static_cast<int64_t>(gen() % static_cast<uint64_t>(i + 1));
    std::swap(order_[i], order_[j]);
  }
}

int DataPartition::Batch(int64_t step, float* x, int32_t* y) const {
  const int64_t begin = step * batch_size_;
  const int64_t end = step + 1 == steps_per_epoch_
                          ? size()
                          : std::min(size(), begin + batch_size_);
  const int n = static_cast<int>(end - begin);
  data_->Gather(order_.data() + begin, n, x, y);
  return n;
}

}  // namespace paramd
