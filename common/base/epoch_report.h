// EpochReport: one worker's figures for one finished epoch, as the worker
// sends them and shard 0's JobMetrics keeps them. The C++ side of
// proto::ReportEpochRequest, so that neither the trainer nor the metrics
// code speaks protobuf; the conversions live in server/shard/proto_convert.h
// and worker/rpc/proto_convert.h.
#ifndef PARAMD_COMMON_BASE_EPOCH_REPORT_H_
#define PARAMD_COMMON_BASE_EPOCH_REPORT_H_

#include <cstdint>

#include "common/base/score_histogram.h"

namespace paramd {

struct EpochReport {
  int epoch = 0;              // 1-based.
  double train_loss_sum = 0;  // Sum of per-sample losses.
  uint64_t train_samples = 0;
  double train_seconds = 0;
  uint64_t test_correct = 0;  // On this rank's share of the test set.
  uint64_t test_total = 0;
  // A binary classifier's test share (two classes: a click log's model)
  // also gives its log loss and its scores by bin; other models leave
  // both empty (test_loss_sum 0).
  double test_loss_sum = 0;  // Sum of per-sample log loss.
  ScoreHistogram test_scores;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_EPOCH_REPORT_H_
