// A framework job's model declared by its workers (docs/job-file.md,
// "Framework models"): YAML holding `tensors`, the list a tensors file
// holds, and, for a job file without an optimizer section, `optimizer`,
// that section. Declared in common/config/job_file.h.

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/config/job_file.h"
#include "common/config/job_sections.h"

namespace paramd {
namespace {

// How errors name the declaration (it is not a file).
constexpr char kDeclared[] = "the declared model";

std::string Described(const TensorConfig& t) {
  return absl::StrCat("'", t.name, "' [", absl::StrJoin(t.shape, ", "), "]",
                      t.statistic ? " (statistic)" : "");
}

// `node` as one line: scalars as they are written, mappings as
// "{key: value, ...}" in their order.
std::string OneLine(const YAML::Node& node) {
  if (!node.IsMap()) return node.IsScalar() ? node.Scalar() : "";
  std::vector<std::string> items;
  for (const auto& item : node) {
    items.push_back(
        absl::StrCat(item.first.Scalar(), ": ", OneLine(item.second)));
  }
  return absl::StrCat("{", absl::StrJoin(items, ", "), "}");
}

// The `optimizer` mapping of a declaration, as one line (empty when it
// has none): two declarations name the same optimizer when these are
// equal.
std::string OptimizerText(const std::string& declaration) {
  try {
    const YAML::Node root = YAML::Load(declaration);
    if (!root.IsMap() || !root["optimizer"].IsDefined()) return "";
    return OneLine(root["optimizer"]);
  } catch (const YAML::Exception&) {
    return "";
  }
}

absl::StatusOr<YAML::Node> LoadDeclaration(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return YamlReader(kDeclared).ErrorAtLine(
        e.mark.is_null() ? 1 : e.mark.line + 1, "(syntax)", e.msg);
  }
}

// The first difference between the job's tensors and declared ones.
absl::Status SameTensors(const std::vector<TensorConfig>& want,
                         const std::vector<TensorConfig>& got) {
  const size_t n = std::min(want.size(), got.size());
  for (size_t i = 0; i < n; ++i) {
    if (got[i].name != want[i].name || got[i].shape != want[i].shape ||
        got[i].statistic != want[i].statistic) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the declared model's tensor ", i, " is ", Described(got[i]),
          " but the job's is ", Described(want[i])));
    }
  }
  if (got.size() == want.size()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the declared model has ", got.size(),
                   " tensors and the job's ", want.size(), ": ",
                   got.size() > want.size()
                       ? absl::StrCat("the declared ", Described(got[n]),
                                      " is not in the job's")
                       : absl::StrCat("the job's ", Described(want[n]),
                                      " is not in the declared model")));
}

// Reads `root` (a declaration's document): its tensors into `tensors`,
// its optimizer into `out` (a copy of `job`).
absl::Status ReadDeclaration(YamlReader& r, const YAML::Node& root,
                             const JobConfig& job,
                             std::vector<TensorConfig>* tensors,
                             JobConfig* out) {
  if (!root.IsMap()) {
    return r.Error(root, "(document)",
                   "expected a mapping with tensors (and optimizer when the "
                   "job file has none)");
  }
  RETURN_IF_ERROR(r.CheckMapping(root, "", {"tensors", "optimizer"}));
  if (!root["tensors"].IsDefined()) {
    return r.MissingError(root, "", "tensors", "missing required field");
  }
  ModelConfig declared;
  RETURN_IF_ERROR(ParseTensorList(r, root["tensors"], "tensors", &declared));
  *tensors = std::move(declared.tensors);
  const YAML::Node optimizer = root["optimizer"];
  if (!optimizer.IsDefined()) {
    if (job.optimizer_declared) {
      return r.MissingError(
          root, "", "optimizer",
          absl::StrCat(job.path,
                       " has no optimizer section: the workers declare it "
                       "(paramd.torch: DistributedOptimizer(model, "
                       "torch_optimizer))"));
    }
    return absl::OkStatus();
  }
  if (!job.optimizer_declared) {
    return r.Error(
        optimizer, "optimizer",
        absl::StrCat("the servers run the optimizer section of ", job.path,
                     "; leave it out of the job file to run the "
                     "workers' optimizer instead"));
  }
  RETURN_IF_ERROR(
      r.CheckMapping(optimizer, "optimizer", OptimizerSectionKeys()));
  RETURN_IF_ERROR(ParseOptimizerSection(r, optimizer, &out->optimizer));
  // As the job file's own section is checked against its compression.
  if (out->compression.momentum > 0 &&
      (out->optimizer.type != "sgd" || out->optimizer.momentum != 0)) {
    return r.Error(optimizer, "optimizer",
                   "the job's compression.momentum moves SGD's momentum to "
                   "the workers: it needs type sgd with momentum 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JobConfig> WithDeclaredModel(const JobConfig& job,
                                            const std::string& declaration) {
  if (job.model.type != ModelType::kTensors) {
    return absl::FailedPreconditionError(
        absl::StrCat(job.path,
                     ": only a model.type tensors job takes its model from "
                     "its workers"));
  }
  YamlReader r(kDeclared);
  ASSIGN_OR_RETURN(const YAML::Node root, LoadDeclaration(declaration));
  JobConfig out = job;
  std::vector<TensorConfig> tensors;
  try {
    RETURN_IF_ERROR(ReadDeclaration(r, root, job, &tensors, &out));
  } catch (const YAML::Exception& e) {
    // Defensive, as for the job file: no exception leaves this module.
    return r.ErrorAtLine(e.mark.is_null() ? 1 : e.mark.line + 1, "(structure)",
                         e.msg);
  }
  if (job.model.tensors_declared) {
    out.model.tensors = std::move(tensors);
  } else {
    // The job file lists the tensors: the declaration must be that list.
    RETURN_IF_ERROR(SameTensors(job.model.tensors, tensors));
  }
  out.declaration = declaration;
  return out;
}

absl::Status SameDeclaredModel(const JobConfig& adopted,
                               const JobConfig& declared) {
  RETURN_IF_ERROR(SameTensors(adopted.model.tensors, declared.model.tensors));
  if (adopted.optimizer_declared && OptimizerText(adopted.declaration) !=
                                        OptimizerText(declared.declaration)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the declared optimizer ", OptimizerText(declared.declaration),
        " is not the job's ", OptimizerText(adopted.declaration)));
  }
  return absl::OkStatus();
}

}  // namespace paramd
