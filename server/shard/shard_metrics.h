// The Prometheus metrics of one shard (GET /metrics of paramd-server):
// its status (proto ShardStatus) and the shard's histograms, read when a
// scrape comes.
// Every sample is labelled job and shard; per-rank ones add rank, per-epoch
// ones epoch. Metric names and their meaning: docs/deploy.md.
#ifndef PARAMD_SERVER_SHARD_SHARD_METRICS_H_
#define PARAMD_SERVER_SHARD_SHARD_METRICS_H_

#include <vector>

#include "absl/time/time.h"
#include "prometheus/metric_family.h"
#include "server/shard/shard.h"

namespace paramd {

std::vector<prometheus::MetricFamily> ShardMetrics(const Shard& shard,
                                                   absl::Time process_started);

}  // namespace paramd

#endif  // PARAMD_SERVER_SHARD_SHARD_METRICS_H_
