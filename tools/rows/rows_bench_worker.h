// One worker of tools/rows_bench: trains an embedding_concat model on its
// share of the synthetic click log (tools/rows/click_log.h) through a real
// gRPC client, timing every step.
#ifndef PARAMD_TOOLS_ROWS_ROWS_BENCH_WORKER_H_
#define PARAMD_TOOLS_ROWS_ROWS_BENCH_WORKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"
#include "tools/rows/click_log.h"

namespace paramd {

struct RowsWorkerOptions {
  int rank = 0;
  int64_t samples = 0;  // All workers together; each takes every W-th batch.
  int batch = 1024;
};

struct RowsWorkerResult {
  int64_t steps = 0;
  double seconds = 0;        // Wall time of the steps.
  double pull_seconds = 0;   // Inside PullRows.
  double step_seconds = 0;   // Inside PushPull.
  int64_t rows_pulled = 0;   // Distinct rows per step, summed.
  int64_t ids = 0;           // Ids before de-duplication.
  int64_t bytes_pulled = 0;  // Row values pulled.
  int64_t bytes_pushed = 0;  // Row ids and gradients pushed.
  // Mean log loss over the last tenth of the samples (each seen once, so
  // it is held-out loss), and the teacher's on the same samples.
  double final_loss = 0;
  double teacher_loss = 0;
  double first_loss = 0;       // Over the first tenth.
  int64_t peak_rss_bytes = 0;  // VmHWM at the end.

  std::string ToJson() const;
  static absl::StatusOr<RowsWorkerResult> FromJson(const std::string& json);
};

absl::StatusOr<RowsWorkerResult> RunRowsWorker(
    const JobConfig& config, const std::vector<std::string>& servers,
    const ClickLogOptions& log, const RowsWorkerOptions& options);

}  // namespace paramd

#endif  // PARAMD_TOOLS_ROWS_ROWS_BENCH_WORKER_H_
