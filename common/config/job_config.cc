#include "common/config/job_config.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace paramd {

const char* PolicyName(PolicyType type) {
  switch (type) {
    case PolicyType::kSync:
      return "sync";
    case PolicyType::kAsync:
      return "async";
    case PolicyType::kSsp:
      return "ssp";
  }
  return "unknown";
}

const char* StalenessScalingName(StalenessScaling scaling) {
  return scaling == StalenessScaling::kInverse ? "inverse" : "none";
}

const char* ModelTypeName(ModelType type) {
  switch (type) {
    case ModelType::kMlp:
      return "mlp";
    case ModelType::kEmbeddingBag:
      return "embedding_bag";
    case ModelType::kEmbeddingConcat:
      return "embedding_concat";
    case ModelType::kTensors:
      return "tensors";
  }
  return "unknown";
}

const char* LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kDense:
      return "dense";
    case LayerKind::kConv2d:
      return "conv2d";
    case LayerKind::kMaxPool2d:
      return "max_pool2d";
    case LayerKind::kAvgPool2d:
      return "avg_pool2d";
    case LayerKind::kRelu:
      return "relu";
    case LayerKind::kDropout:
      return "dropout";
    case LayerKind::kFlatten:
      return "flatten";
    case LayerKind::kBatchNorm:
      return "batch_norm";
    case LayerKind::kBottomDense:
      return "bottom_dense";
    case LayerKind::kEmbeddingBag:
      return "embedding_bag";
    case LayerKind::kEmbeddingConcat:
      return "embedding_concat";
  }
  return "unknown";
}

bool ServersTakeSlices(const JobConfig& config) {
  return config.policy.type == PolicyType::kSync &&
         config.policy.backup_workers == 0 && !config.replication.enabled() &&
         !config.guard.enabled && config.optimizer.clip_norm <= 0 &&
         config.model.embeddings.empty() && !config.compression.pull_fp16();
}

absl::Status ParseHostPort(const std::string& address, std::string* host,
                           int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected \"host:port\", got '", address, "'"));
  }
  int p = -1;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &p) || p < 0 || p > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("port of '", address, "' must be in [0, 65535]"));
  }
  *host = address.substr(0, colon);
  *port = p;
  return absl::OkStatus();
}

}  // namespace paramd
