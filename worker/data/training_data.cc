#include "worker/data/training_data.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/layer_shapes.h"
#include "worker/data/click_log_file.h"
#include "worker/data/dataset.h"

namespace paramd {
namespace {

class ImageData : public TrainingData {
 public:
  ImageData(Dataset train, Dataset test)
      : train_(std::move(train)), test_(std::move(test)) {}

  absl::Status Partition(int rank, int world, int batch) {
    ASSIGN_OR_RETURN(DataPartition part,
                     DataPartition::Create(&train_, rank, world, batch));
    part_ = std::make_unique<DataPartition>(std::move(part));
    return absl::OkStatus();
  }

  bool ids() const override { return false; }
  int64_t values_per_sample() const override { return train_.dim; }
  int height() const override { return train_.height; }
  int width() const override { return train_.width; }
  int num_classes() const override {
    return std::max(train_.num_classes, test_.num_classes);
  }
  int64_t train_size() const override { return part_->size(); }
  int64_t test_size() const override { return test_.size; }
  int64_t steps_per_epoch() const override { return part_->steps_per_epoch(); }
  int max_batch() const override { return part_->max_batch(); }
  void StartEpoch(uint64_t seed, int epoch, bool shuffle) override {
    part_->StartEpoch(seed, epoch, shuffle);
  }
  absl::StatusOr<int> TrainBatch(int64_t step, SampleBatch* out) override {
    Room(part_->max_batch(), out);
    return part_->Batch(step, out->x.data(), out->y.data());
  }
  absl::StatusOr<int> TestBatch(int64_t first, int n,
                                SampleBatch* out) override {
    n = static_cast<int>(std::clamp<int64_t>(test_.size - first, 0, n));
    Room(n, out);
    index_.resize(n);
    for (int i = 0; i < n; ++i) index_[i] = first + i;
    test_.Gather(index_.data(), n, out->x.data(), out->y.data());
    return n;
  }

 private:
  void Room(int n, SampleBatch* out) const {
    const size_t x = static_cast<size_t>(n) * train_.dim;
    if (out->x.size() < x) out->x.resize(x);
    if (out->y.size() < static_cast<size_t>(n)) out->y.resize(n);
  }

  Dataset train_, test_;
  std::unique_ptr<DataPartition> part_;
  std::vector<int64_t> index_;
};

class ClickData : public TrainingData {
 public:
  ClickData(std::unique_ptr<ClickLogFile> train,
            std::unique_ptr<ClickLogFile> test, int world, int batch)
      : train_(std::move(train)), test_(std::move(test)), batch_(batch) {
    const int64_t smallest = train_->full_size() / world;
    steps_ = (smallest + batch - 1) / batch;
    max_batch_ = static_cast<int>(
        std::max<int64_t>(batch, train_->size() - (steps_ - 1) * batch));
  }

  bool ids() const override { return true; }
  int64_t values_per_sample() const override { return train_->fields(); }
  int num_classes() const override {
    return std::max(train_->num_classes(),
                    test_ != nullptr ? test_->num_classes() : 0);
  }
  int64_t train_size() const override { return train_->size(); }
  int64_t test_size() const override {
    return test_ != nullptr ? test_->size() : 0;
  }
  int64_t steps_per_epoch() const override { return steps_; }
  int max_batch() const override { return max_batch_; }
  void StartEpoch(uint64_t, int, bool) override {}
  absl::StatusOr<int> TrainBatch(int64_t step, SampleBatch* out) override {
    const int64_t first = step * batch_;
    const int n =
        step + 1 == steps_ ? static_cast<int>(train_->size() - first) : batch_;
    return Read(train_.get(), first, n, out);
  }
  absl::StatusOr<int> TestBatch(int64_t first, int n,
                                SampleBatch* out) override {
    if (test_ == nullptr) return 0;
    return Read(test_.get(), first, n, out);
  }

 private:
  static absl::StatusOr<int> Read(ClickLogFile* file, int64_t first, int n,
                                  SampleBatch* out) {
    const size_t ids = static_cast<size_t>(n) * file->fields();
    const size_t dense = static_cast<size_t>(n) * file->dense();
    if (out->ids.size() < ids) out->ids.resize(ids);
    if (out->x.size() < dense) out->x.resize(dense);
    if (out->y.size() < static_cast<size_t>(n)) out->y.resize(n);
    return file->Read(first, n, out->ids.data(), out->x.data(), out->y.data());
  }

  std::unique_ptr<ClickLogFile> train_, test_;
  const int batch_;
  int64_t steps_ = 0;
  int max_batch_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TrainingData>> TrainingData::Load(
    const JobConfig& config, int rank) {
  const DataConfig& d = config.data;
  const int world = config.num_workers;
  const int batch = config.training.batch_size;
  if (d.format == DataFormat::kIdx) {
    ASSIGN_OR_RETURN(Dataset train, LoadDataset(d.train_images, d.train_labels,
                                                d.train_limit, rank, world));
    ASSIGN_OR_RETURN(Dataset test, LoadDataset(d.test_images, d.test_labels,
                                               d.test_limit, rank, world));
    auto data = std::make_unique<ImageData>(std::move(train), std::move(test));
    RETURN_IF_ERROR(data->Partition(rank, world, batch));
    return std::unique_ptr<TrainingData>(std::move(data));
  }
  // A click log feeds the sparse front: its fields are the front's ids.
  ASSIGN_OR_RETURN(const LayerGraph graph, InferLayerGraph(config.model));
  if (!graph.front.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.path,
                     ": data.format clicks: the model has no "
                     "embedding_bag or embedding_concat layer to read ids"));
  }
  const SparseFront& front = *graph.front;
  const uint64_t rows = config.model.embeddings[front.table].rows;
  // The tokens of a line: the front's fields.
  const int fields = front.fields;
  if (fields < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.path,
        ": data.format clicks: model.layers[0].embedding_bag.fields says "
        "how many tokens follow a line's label"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ClickLogFile> train,
                   ClickLogFile::Open(d.train_file, fields, front.dense, rows,
                                      d.train_limit, rank, world));
  if (train->full_size() < world) {
    return absl::InvalidArgumentError(
        absl::StrCat(d.train_file, ": its ", train->full_size(),
                     " samples cannot feed ", world, " workers"));
  }
  std::unique_ptr<ClickLogFile> test;
  if (!d.test_file.empty()) {
    ASSIGN_OR_RETURN(test, ClickLogFile::Open(d.test_file, fields, front.dense,
                                              rows, d.test_limit, rank, world));
  }
  return std::unique_ptr<TrainingData>(std::make_unique<ClickData>(
      std::move(train), std::move(test), world, batch));
}

}  // namespace paramd
