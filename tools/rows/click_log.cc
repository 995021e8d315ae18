#include "tools/rows/click_log.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/mix.h"

namespace paramd {
namespace {

// A double in (0, 1) from 53 bits of `bits`.
double Open01(uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) / 9007199254740992.0;
}

}  // namespace

ClickLog::ClickLog(const ClickLogOptions& options)
    : options_(options),
      a_(1.0 - options.zipf),
      top_(std::pow(4294967296.0, 1.0 - options.zipf) - 1.0) {}

double ClickLog::ZipfRank(double u) const {
  // The inverse CDF of the continuous power law on [1, 2^32].
  return std::pow(top_ * u + 1.0, 1.0 / a_);
}

uint64_t ClickLog::RowOf(int field, uint32_t value) {
  return Mix((static_cast<uint64_t>(field) << 32) | value) & 0xFFFFFFFFULL;
}

double ClickLog::TeacherWeight(int field, uint32_t value) const {
  const uint64_t h = Mix(Mix(options_.seed ^ 0x7465616368ULL) ^
                         ((static_cast<uint64_t>(field) << 32) | value));
  return options_.teacher_scale * NormalFromBits(h);
}

int ClickLog::Sample(uint64_t index, uint32_t* values, int64_t* counts,
                     double* teacher_loss) const {
  const uint64_t stream = Mix(Mix(options_.seed) ^ Mix(index));
  double logit = options_.teacher_bias;
  for (int j = 0; j < options_.dense; ++j) {
    const double mu = 0.5 + j / 4.0;
    const double z = NormalFromBits(Mix(stream ^ (0x64656e7365ULL + j)));
    counts[j] = std::max<int64_t>(
        0, static_cast<int64_t>(std::floor(std::exp(mu + z))) - 1);
    const double a =
        options_.dense_scale *
        NormalFromBits(Mix(Mix(options_.seed ^ 0x64656e7365ULL) + j));
    logit += a * std::tanh(std::log1p(static_cast<double>(counts[j])) - mu);
  }
  for (int f = 0; f < options_.fields; ++f) {
    const double u = Open01(Mix(stream + f));
    const uint64_t rank =
        std::min<uint64_t>(static_cast<uint64_t>(ZipfRank(u)), 4294967296ULL);
    // Scatter ranks over the 32-bit values, per field.
    values[f] =
        static_cast<uint32_t>(Mix(rank ^ (static_cast<uint64_t>(f) << 40)));
    logit += TeacherWeight(f, values[f]);
  }
  const double p = 1.0 / (1.0 + std::exp(-logit));
  const int label = Open01(Mix(stream ^ 0x6C6162656CULL)) < p ? 1 : 0;
  *teacher_loss = -std::log(label == 1 ? p : 1.0 - p);
  return label;
}

double ExactAuc(std::vector<double>* positives,
                std::vector<double>* negatives) {
  if (positives->empty() || negatives->empty()) return 0;
  std::sort(positives->begin(), positives->end());
  std::sort(negatives->begin(), negatives->end());
  // For each positive, the negatives below it and those equal to it.
  long double ordered = 0;
  size_t below = 0, through = 0;
  for (double p : *positives) {
    while (below < negatives->size() && (*negatives)[below] < p) ++below;
    through = std::max(through, below);
    while (through < negatives->size() && (*negatives)[through] <= p) {
      ++through;
    }
    ordered += below + 0.5L * (through - below);
  }
  return static_cast<double>(
      ordered /
      (static_cast<long double>(positives->size()) * negatives->size()));
}

absl::StatusOr<ClickLogFigures> WriteClickLogFile(const ClickLog& log,
                                                  uint64_t first, int64_t count,
                                                  const std::string& path) {
  std::unique_ptr<FILE, decltype(&std::fclose)> out(
      std::fopen(path.c_str(), "w"), &std::fclose);
  if (out == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot write"));
  }
  ClickLogFigures f;
  std::vector<uint32_t> values(log.fields());
  std::vector<int64_t> counts(log.dense());
  std::vector<double> positives, negatives;  // The teacher's p by label.
  std::string line;
  char hex[16];
  for (int64_t i = 0; i < count; ++i) {
    double loss = 0;
    const int label =
        log.Sample(first + i, values.data(), counts.data(), &loss);
    // The teacher's p of the label it drew, and so its prediction.
    const double p_label = std::exp(-loss);
    const bool predicts_click = label == 1 ? p_label > 0.5 : p_label < 0.5;
    f.teacher_loss += loss;
    f.teacher_accuracy += predicts_click == (label == 1) ? 1 : 0;
    f.clicks += label;
    (label == 1 ? positives : negatives)
        .push_back(label == 1 ? p_label : 1.0 - p_label);
    line.assign(1, static_cast<char>('0' + label));
    for (int64_t c : counts) absl::StrAppend(&line, "\t", c);
    for (uint32_t v : values) {
      std::snprintf(hex, sizeof(hex), "\t%08x", v);
      line += hex;
    }
    line += '\n';
    if (std::fwrite(line.data(), 1, line.size(), out.get()) != line.size()) {
      return absl::DataLossError(absl::StrCat(path, ": write failed"));
    }
  }
  if (std::fclose(out.release()) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": write failed"));
  }
  f.samples = count;
  f.teacher_auc = ExactAuc(&positives, &negatives);
  if (count > 0) {
    f.clicks /= count;
    f.teacher_loss /= count;
    f.teacher_accuracy /= count;
  }
  return f;
}

}  // namespace paramd
