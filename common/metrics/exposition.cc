#include "common/metrics/exposition.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

bool NameChar(char c, bool first, bool colon) {
  if (absl::ascii_isalpha(c) || c == '_') return true;
  if (colon && c == ':') return true;
  return !first && absl::ascii_isdigit(c);
}

bool ValidName(absl::string_view name, bool colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameChar(name[i], i == 0, colon)) return false;
  }
  return true;
}

// Backslash and newline escaped; double quotes too when `quotes` (label
// values; HELP text keeps them).
std::string Escape(absl::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

MetricsText::MetricsText(MetricLabels common) : common_(std::move(common)) {
  for (const auto& [name, value] : common_) {
    if (!ValidLabelName(name)) std::abort();
  }
}

bool MetricsText::ValidMetricName(absl::string_view name) {
  return ValidName(name, /*colon=*/true);
}

bool MetricsText::ValidLabelName(absl::string_view name) {
  // Names starting with __ are reserved for Prometheus itself.
  return ValidName(name, /*colon=*/false) && !absl::StartsWith(name, "__");
}

std::string MetricsText::EscapeLabelValue(absl::string_view value) {
  return Escape(value, /*quotes=*/true);
}

std::string MetricsText::FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) <= 9007199254740992.0) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f", value);
    return buf;
  }
  // The shortest of 15, 16 or 17 digits that reads back exactly.
  char buf[32];
  for (int digits : {15, 16, 17}) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

void MetricsText::Declare(absl::string_view name, MetricType type,
                          absl::string_view help) {
  if (!ValidMetricName(name)) std::abort();
  for (const Family& f : families_) {
    if (f.name == name) std::abort();  // Declared twice.
  }
  families_.push_back(Family{std::string(name), type, std::string(help), {}});
}

MetricsText::Family& MetricsText::Find(absl::string_view name) {
  for (Family& f : families_) {
    if (f.name == name) return f;
  }
  std::abort();  // A sample of an undeclared family.
}

std::string MetricsText::LabelText(
    const MetricLabels& labels,
    const std::pair<std::string, std::string>* extra) const {
  if (common_.empty() && labels.empty() && extra == nullptr) return "";
  std::string out = "{";
  bool first = true;
  auto add = [&](const std::pair<std::string, std::string>& label) {
    if (!ValidLabelName(label.first)) std::abort();
    absl::StrAppend(&out, first ? "" : ",", label.first, "=\"",
                    EscapeLabelValue(label.second), "\"");
    first = false;
  };
  for (const auto& label : common_) add(label);
  for (const auto& label : labels) add(label);
  if (extra != nullptr) add(*extra);
  out += "}";
  return out;
}

void MetricsText::Add(absl::string_view name, const MetricLabels& labels,
                      double value) {
  Family& f = Find(name);
  if (f.type == MetricType::kHistogram) std::abort();
  f.lines.push_back(
      absl::StrCat(name, LabelText(labels, nullptr), " ", FormatValue(value)));
}

void MetricsText::AddHistogram(absl::string_view name,
                               const MetricLabels& labels,
                               const HistogramSnapshot& h) {
  Family& f = Find(name);
  if (f.type != MetricType::kHistogram) std::abort();
  for (size_t i = 0; i <= h.upper_bounds.size(); ++i) {
    const std::pair<std::string, std::string> le{
        "le", i < h.upper_bounds.size() ? FormatValue(h.upper_bounds[i])
                                        : std::string("+Inf")};
    f.lines.push_back(absl::StrCat(name, "_bucket", LabelText(labels, &le), " ",
                                   h.cumulative[i]));
  }
  const std::string label_text = LabelText(labels, nullptr);
  f.lines.push_back(
      absl::StrCat(name, "_sum", label_text, " ", FormatValue(h.sum)));
  f.lines.push_back(absl::StrCat(name, "_count", label_text, " ", h.count));
}

std::string MetricsText::Render() const {
  std::string out;
  for (const Family& f : families_) {
    absl::StrAppend(&out, "# HELP ", f.name, " ",
                    Escape(f.help, /*quotes=*/false), "\n");
    absl::StrAppend(&out, "# TYPE ", f.name, " ", TypeName(f.type), "\n");
    for (const std::string& line : f.lines) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

void AddProcessMetrics(MetricsText& text, absl::Time started) {
  text.Declare("process_resident_memory_bytes", MetricType::kGauge,
               "Resident memory size in bytes.");
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  if (statm >> pages_total >> pages_resident) {
    text.Add("process_resident_memory_bytes", {},
             static_cast<double>(pages_resident) *
                 static_cast<double>(sysconf(_SC_PAGESIZE)));
  }
  text.Declare("process_start_time_seconds", MetricType::kGauge,
               "Start time of the process since the Unix epoch in seconds.");
  text.Add("process_start_time_seconds", {}, absl::ToUnixSeconds(started));
}

}  // namespace paramd
