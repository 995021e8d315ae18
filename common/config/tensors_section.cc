// The tensors of a model.type tensors job (docs/job-file.md, "Framework
// models"): model.tensors inline, or model.tensors_file, a YAML file of its
// own with one key `tensors` (python/paramd writes it from a model). Declared
// in common/config/job_sections.h, called by the job-file parser.

#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/job_sections.h"

namespace paramd {
namespace {

absl::Status ParseShape(YamlReader& r, const YAML::Node& node,
                        const std::string& f, TensorConfig* t) {
  if (!node.IsDefined() || node.IsNull()) {
    return r.Error(node, f, "missing required field");
  }
  if (!node.IsSequence()) {
    return r.Error(node, f,
                   "expected a list of dimensions, e.g. [32, 1, 3, 3] ([] "
                   "for a scalar)");
  }
  for (size_t d = 0; d < node.size(); ++d) {
    int64_t dim = 0;
    if (!node[d].IsScalar() || !absl::SimpleAtoi(node[d].Scalar(), &dim) ||
        dim < 1 || dim > kMaxTensorElements) {
      return r.Error(node[d], absl::StrCat(f, "[", d, "]"),
                     "expected a positive integer dimension");
    }
    t->shape.push_back(dim);
  }
  return absl::OkStatus();
}

absl::Status ParseTensor(YamlReader& r, const YAML::Node& node,
                         const std::string& f, TensorConfig* t,
                         int64_t* elements) {
  RETURN_IF_ERROR(r.CheckMapping(
      node, f, {"name", "shape", "init", "bound", "value", "kind"}));
  RETURN_IF_ERROR(r.Get(node, f, "name", true, &t->name));
  if (t->name.empty()) {
    return r.Error(node["name"], f + ".name", "must not be empty");
  }
  if (!node["shape"].IsDefined()) {
    return r.MissingError(node, f, f + ".shape", "missing required field");
  }
  RETURN_IF_ERROR(ParseShape(r, node["shape"], f + ".shape", t));
  int64_t n = 1;
  for (int64_t dim : t->shape) {
    if (n > kMaxTensorElements / dim) {
      return r.Error(node["shape"], f + ".shape",
                     absl::StrCat("tensor '", t->name, "' has more than ",
                                  kMaxTensorElements, " elements"));
    }
    n *= dim;
  }
  *elements += n;
  if (*elements > kMaxTensorElements) {
    return r.Error(node["shape"], f + ".shape",
                   absl::StrCat("the model's tensors hold more than ",
                                kMaxTensorElements, " elements together"));
  }
  std::string init = "uniform";
  RETURN_IF_ERROR(r.Get(node, f, "init", false, &init));
  if (init != "uniform" && init != "constant") {
    return r.Error(node["init"], f + ".init",
                   absl::StrCat("unknown initialiser '", init,
                                "' (expected: uniform or constant)"));
  }
  t->constant = init == "constant";
  std::string kind = "trainable";
  RETURN_IF_ERROR(r.Get(node, f, "kind", false, &kind));
  if (kind != "trainable" && kind != "statistic") {
    return r.Error(node["kind"], f + ".kind",
                   absl::StrCat("unknown kind '", kind,
                                "' (expected: trainable or statistic)"));
  }
  t->statistic = kind == "statistic";
  const char* wrong = t->constant ? "bound" : "value";
  if (node[wrong].IsDefined()) {
    return r.Error(node[wrong], absl::StrCat(f, ".", wrong),
                   absl::StrCat("does not apply to init ", init));
  }
  if (t->constant) {
    RETURN_IF_ERROR(r.Get(node, f, "value", true, &t->value));
    if (!(t->value > -1e30 && t->value < 1e30)) {
      return r.Error(node["value"], f + ".value", "must be a finite float");
    }
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(r.Get(node, f, "bound", true, &t->bound));
  if (!(t->bound >= 0 && t->bound < 1e6)) {
    return r.Error(node["bound"], f + ".bound", "must be in [0, 1e6)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseTensorList(YamlReader& r, const YAML::Node& list,
                             const std::string& field, ModelConfig* out) {
  if (!list.IsSequence() || list.size() == 0) {
    return r.Error(list, field,
                   "expected a non-empty list of tensors {name, shape, init, "
                   "bound | value, kind}");
  }
  std::set<std::string> names;
  int64_t elements = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string f = absl::StrCat(field, "[", i, "]");
    TensorConfig t;
    RETURN_IF_ERROR(ParseTensor(r, list[i], f, &t, &elements));
    if (!names.insert(t.name).second) {
      return r.Error(list[i]["name"], f + ".name",
                     absl::StrCat("tensor '", t.name, "' is listed twice"));
    }
    out->tensors.push_back(std::move(t));
  }
  return absl::OkStatus();
}

namespace {

absl::Status ParseTensorsFile(YamlReader& r, const YAML::Node& at,
                              const std::string& path, ModelConfig* out) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return r.Error(at, "model.tensors_file",
                   absl::StrCat("cannot read '", path, "'"));
  } catch (const YAML::Exception& e) {
    return YamlReader(path).ErrorAtLine(
        e.mark.line + 1, "tensors", absl::StrCat("malformed YAML: ", e.msg));
  }
  YamlReader file(path);
  if (!root.IsMap()) {
    return file.Error(root, "tensors",
                      "expected a mapping with one key, tensors");
  }
  RETURN_IF_ERROR(file.CheckMapping(root, "", {"tensors"}));
  if (!root["tensors"].IsDefined()) {
    return file.Error(root, "tensors", "missing required field");
  }
  return ParseTensorList(file, root["tensors"], "tensors", out);
}

}  // namespace

absl::Status ParseTensorsSection(YamlReader& r, const YAML::Node& model,
                                 const PathResolver& resolve,
                                 ModelConfig* out) {
  std::string initial = "servers";
  RETURN_IF_ERROR(r.Get(model, "model", "initial_values", false, &initial));
  if (initial != "servers" && initial != "rank0") {
    return r.Error(model["initial_values"], "model.initial_values",
                   absl::StrCat("unknown source '", initial,
                                "' (expected: servers or rank0)"));
  }
  out->initial_values_from_rank0 = initial == "rank0";
  const YAML::Node inline_list = model["tensors"];
  const YAML::Node file = model["tensors_file"];
  if (inline_list.IsDefined() && file.IsDefined()) {
    return r.Error(file, "model.tensors_file",
                   "give model.tensors or model.tensors_file, not both");
  }
  if (!inline_list.IsDefined() && !file.IsDefined()) {
    // The workers declare the tensors (paramd.torch does, from the model).
    out->tensors_declared = true;
    return absl::OkStatus();
  }
  if (inline_list.IsDefined()) {
    return ParseTensorList(r, inline_list, "model.tensors", out);
  }
  std::string path;
  RETURN_IF_ERROR(r.Get(model, "model", "tensors_file", true, &path));
  if (path.empty()) {
    return r.Error(file, "model.tensors_file", "must not be empty");
  }
  out->tensors_file = resolve(path);
  return ParseTensorsFile(r, file, out->tensors_file, out);
}

}  // namespace paramd
