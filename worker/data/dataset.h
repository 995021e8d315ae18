// Dataset: images and labels of one split, and DataPartition: one rank's share
// of it, shuffled per epoch and cut into batches.
#ifndef PARAMD_WORKER_DATA_DATASET_H_
#define PARAMD_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace paramd {

// A labelled image set. Pixels stay bytes in memory (a quarter of the
// float size) and are scaled to [0, 1] floats per batch.
struct Dataset {
  // Samples held: the split's (after the limit), or one rank's share of
  // them, sample i of the split at index i / world (i % world == rank).
  int64_t size = 0;
  int64_t full_size = 0;  // Samples in the split, after the limit.
  int rank = 0, world = 1;
  int64_t dim = 0;              // Pixels per image: height × width.
  int height = 1, width = 1;    // From the IDX header ([N, rows, cols]).
  int num_classes = 0;          // 1 + the largest label.
  std::vector<uint8_t> pixels;  // size × dim
  std::vector<uint8_t> labels;  // size

  // Writes samples indices[0..n) as floats in [0, 1] into x (n × dim) and
  // their labels into y.
  void Gather(const int64_t* indices, int n, float* x, int32_t* y) const;
};

// Loads an image file and its label file; `limit` > 0 keeps only the first
// `limit` samples, and of those only rank `rank`'s share of `world` (i %
// world == rank; the images are never held whole). Errors name the file.
absl::StatusOr<Dataset> LoadDataset(const std::string& images_path,
                                    const std::string& labels_path,
                                    int64_t limit, int rank = 0, int world = 1);

// Rank `rank`'s share of a dataset: samples i with i % world == rank, of a
// whole split or of one loaded as that share.
// Every rank has the same number of steps per epoch (from the smallest
// share), so synchronous training never waits on a rank that ran out; the
// last batch of an epoch takes whatever the share has left.
class DataPartition {
 public:
  // Fails when the dataset has fewer samples than ranks.
  static absl::StatusOr<DataPartition> Create(const Dataset* data, int rank,
                                              int world, int batch_size);

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t size() const { return static_cast<int64_t>(order_.size()); }

  // Restores the rank's natural order, then (if `shuffle`) permutes it with
  // a generator seeded by (seed, epoch, rank): reproducible per epoch.
  void StartEpoch(uint64_t seed, int epoch, bool shuffle);

  // Fills batch `step` of the current epoch; returns its size.
  int Batch(int64_t step, float* x, int32_t* y) const;
  int max_batch() const { return max_batch_; }

 private:
  DataPartition(const Dataset* data, int rank, std::vector<int64_t> order,
                int batch_size, int64_t steps);

  const Dataset* data_;
  int rank_;
  std::vector<int64_t> natural_;
  std::vector<int64_t> order_;
  int batch_size_;
  int64_t steps_per_epoch_;
  int max_batch_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_DATA_DATASET_H_
