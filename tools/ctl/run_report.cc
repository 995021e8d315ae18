#include "tools/ctl/run_report.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace paramd {

PushBytes PushBytesPerStep(const std::vector<ServerStatus>& shards) {
  PushBytes sum;
  for (const ServerStatus& s : shards) {
    if (!s.status.ok() || s.status->pushes() == 0) return PushBytes();
    const double pushes = static_cast<double>(s.status->pushes());
    sum.wire += static_cast<double>(s.status->bytes_in()) / pushes;
    sum.float32 += static_cast<double>(s.status->bytes_in_float32()) / pushes;
  }
  return sum;
}

std::string PushBytesPhrase(const PushBytes& push) {
  if (push.wire <= 0) return "";
  return absl::StrFormat(", pushes %.1f KB per worker step (%.1f%% of float32)",
                         push.wire / 1e3, 100 * push.wire / push.float32);
}

std::string ScorePhrase(const proto::EpochMetrics& epoch) {
  if (!epoch.test_scored()) return "";
  return absl::StrFormat("  AUC %.4f  log loss %.4f", epoch.test_auc(),
                         epoch.test_log_loss());
}

double MedianSamplesPerSecond(
    const std::map<int, proto::EpochMetrics>& epochs) {
  std::vector<double> v;
  for (const auto& [n, e] : epochs) v.push_back(e.samples_per_second());
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2]
                      : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string SummaryJson(
    const JobConfig& config, const std::map<int, proto::EpochMetrics>& epochs,
    double wall_seconds, const PushBytes& push, int restarts,
    const std::vector<std::pair<std::string, int>>& restarts_by_process) {
  std::string epoch_list;
  for (const auto& [n, e] : epochs) {
    const std::string scores =
        e.test_scored()
            ? absl::StrFormat(
                  "\"test_auc\": %.6f, \"test_auc_error\": %.6f, "
                  "\"test_log_loss\": %.6f, ",
                  e.test_auc(), e.test_auc_error(), e.test_log_loss())
            : "";
    absl::StrAppendFormat(&epoch_list,
                          "%s\n    {\"epoch\": %d, \"train_loss\": %.6f, "
                          "\"test_accuracy\": %.6f, %s"
                          "\"samples_per_second\": %.1f}",
                          epoch_list.empty() ? "" : ",", e.epoch(),
                          e.train_loss(), e.test_accuracy(), scores,
                          e.samples_per_second());
  }
  std::string by_process;
  for (const auto& [name, n] : restarts_by_process) {
    absl::StrAppendFormat(&by_process, "%s\"%s\": %d",
                          by_process.empty() ? "" : ", ", name, n);
  }
  return absl::StrFormat(
      "{\n  \"job_id\": \"%s\",\n  \"policy\": \"%s\",\n  \"servers\": %d,\n"
      "  \"workers\": %d,\n  \"epochs\": %d,\n  \"final_test_accuracy\": "
      "%.6f,\n"
      "  \"wall_seconds\": %.3f,\n  \"samples_per_second\": %.1f,\n"
      "  \"push_bytes_per_step\": %.0f,\n"
      "  \"push_float32_bytes_per_step\": %.0f,\n"
      "  \"restarts\": %d,\n  \"restarts_by_process\": {%s},\n"
      "  \"epoch_metrics\": [%s\n  ]\n}\n",
      config.job_id, PolicyName(config.policy.type), config.num_shards(),
      config.num_workers, config.training.epochs,
      epochs.rbegin()->second.test_accuracy(), wall_seconds,
      MedianSamplesPerSecond(epochs), push.wire, push.float32, restarts,
      by_process, epoch_list);
}

}  // namespace paramd
