// TrainingData: one rank's shares of a job's training and test splits,
// whatever the data's format (data.format): IDX images (Dataset and
// DataPartition, worker/data/dataset.h; bytes in memory, floats per batch)
// or click logs (worker/data/click_log_file.h; streamed from the file, row
// ids per batch). The trainer takes batches of an epoch's steps from it and
// the test share in order for evaluation.
#ifndef PARAMD_WORKER_DATA_TRAINING_DATA_H_
#define PARAMD_WORKER_DATA_TRAINING_DATA_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"

namespace paramd {

// A batch of samples: images as floats in [0, 1] (x, n × pixels) or click
// log samples as table row ids (ids, n × fields), and their labels.
struct SampleBatch {
  // An image's pixels, or a click log's dense features (n × dense).
  std::vector<float> x;
  std::vector<uint64_t> ids;
  std::vector<int32_t> y;
};

class TrainingData {
 public:
  // The rank's shares of `config`'s splits, in training batches of
  // training.batch_size. Errors name the file.
  static absl::StatusOr<std::unique_ptr<TrainingData>> Load(
      const JobConfig& config, int rank);
  virtual ~TrainingData() = default;

  // What a sample is: row ids (click logs) or an image's pixels.
  virtual bool ids() const = 0;
  // Ids or pixels per sample; an image's shape (1 × width for a flat one).
  virtual int64_t values_per_sample() const = 0;
  virtual int height() const { return 1; }
  virtual int width() const { return static_cast<int>(values_per_sample()); }
  // 1 + the largest label of either split.
  virtual int num_classes() const = 0;
  virtual int64_t train_size() const = 0;  // The rank's share.
  virtual int64_t test_size() const = 0;

  // Every rank has the same number of steps per epoch (from the smallest
  // share); the epoch's last batch takes what the share has left, so it
  // may be larger than the batch size (max_batch).
  virtual int64_t steps_per_epoch() const = 0;
  virtual int max_batch() const = 0;

  // Orders the epoch's samples: shuffled by (seed, epoch, rank) when
  // `shuffle` (images only: a click log is read in file order).
  virtual void StartEpoch(uint64_t seed, int epoch, bool shuffle) = 0;
  // Batch `step` of the epoch into `out`; returns its size.
  virtual absl::StatusOr<int> TrainBatch(int64_t step, SampleBatch* out) = 0;
  // The test share's samples [first, first + n) into `out`, in order.
  virtual absl::StatusOr<int> TestBatch(int64_t first, int n,
                                        SampleBatch* out) = 0;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_DATA_TRAINING_DATA_H_
