// What `paramctl run` reports when a job ends: the median epoch's
// samples/s, the bytes a worker step pushes, and the --summary JSON.
#ifndef PARAMD_TOOLS_CTL_RUN_REPORT_H_
#define PARAMD_TOOLS_CTL_RUN_REPORT_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/config/job_config.h"
#include "proto/paramd.pb.h"
#include "tools/ctl/status_format.h"

namespace paramd {

// The bytes one worker step pushes, summed over the shards: as they
// travelled and as float32 (before compression). Zero when unknown.
struct PushBytes {
  double wire = 0;
  double float32 = 0;
};

// From every shard's status (its bytes in over its pushes); zeros if a
// shard did not answer or has no push yet.
PushBytes PushBytesPerStep(const std::vector<ServerStatus>& shards);

// ", pushes 18.9 KB per worker step (2.0% of float32)", or empty when
// unknown.
std::string PushBytesPhrase(const PushBytes& push);

// "  AUC 0.7712  log loss 0.5123" for an epoch with test scores (a binary
// classifier's), else empty.
std::string ScorePhrase(const proto::EpochMetrics& epoch);

// The median of the epochs' samples/s (0 with none).
double MedianSamplesPerSecond(const std::map<int, proto::EpochMetrics>& epochs);

// The --summary document. `epochs` (by number) is not empty.
std::string SummaryJson(
    const JobConfig& config, const std::map<int, proto::EpochMetrics>& epochs,
    double wall_seconds, const PushBytes& push, int restarts,
    const std::vector<std::pair<std::string, int>>& restarts_by_process);

}  // namespace paramd

#endif  // PARAMD_TOOLS_CTL_RUN_REPORT_H_
