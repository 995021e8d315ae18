// The job file's `model` section: the MLP's layers and, for embedding_bag
// models, the embedding tables and how samples become row ids. Declared in
// common/config/job_sections.h, called by the job-file parser.

#include <cstdint>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/job_sections.h"

namespace paramd {
namespace {

absl::Status ParseLayers(YamlReader& r, const YAML::Node& model,
                         ModelConfig* out) {
  const YAML::Node layers = model["layers"];
  if (!layers.IsDefined() || layers.IsNull()) {
    return r.MissingError(model, "model", "model.layers",
                          "missing required field");
  }
  if (IsTypedLayerList(layers)) {
    // The graph's shapes are inferred once the tables are read
    // (ParseModelSection); here its first layer decides the model's type.
    RETURN_IF_ERROR(ParseLayerList(r, model, out));
    if (!out->graph.empty() && IsSparseLayer(out->graph[0].kind)) {
      const ModelType implied = out->graph[0].kind == LayerKind::kEmbeddingBag
                                    ? ModelType::kEmbeddingBag
                                    : ModelType::kEmbeddingConcat;
      if (model["type"].IsDefined() && out->type != implied) {
        return r.Error(
            model["type"], "model.type",
            absl::StrCat(ModelTypeName(out->type), ", but model.layers[0] is ",
                         LayerKindName(out->graph[0].kind),
                         ", which makes the model ", ModelTypeName(implied)));
      }
      out->type = implied;
    } else if (out->type != ModelType::kMlp) {
      return r.Error(layers, "model.layers",
                     absl::StrCat("a ", ModelTypeName(out->type),
                                  " model's typed layers start with its "
                                  "sparse front: model.layers[0] must be ",
                                  ModelTypeName(out->type)));
    }
    return absl::OkStatus();
  }
  if (model["input"].IsDefined()) {
    return r.Error(model["input"], "model.input",
                   "applies to a typed model.layers only; the shorthand's "
                   "first width is its input");
  }
  if (!layers.IsSequence() || layers.size() < 2) {
    return r.Error(layers, "model.layers",
                   "expected a list of at least two layer widths");
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string field = absl::StrCat("model.layers[", i, "]");
    int width = 0;
    if (!layers[i].IsScalar() ||
        !absl::SimpleAtoi(layers[i].Scalar(), &width) || width < 1 ||
        width > (1 << 20)) {
      return r.Error(layers[i], field,
                     "expected a positive integer width (at most 1048576)");
    }
    out->layers.push_back(width);
  }
  return absl::OkStatus();
}

// The table's optimizer: a mapping {type, learning_rate, ...}.
absl::Status ParseTableOptimizer(YamlReader& r, const YAML::Node& node,
                                 const std::string& f,
                                 EmbeddingTableConfig* t) {
  const bool given = node.IsDefined() && !node.IsNull();
  if (given) {
    RETURN_IF_ERROR(r.CheckMapping(
        node, f,
        {"type", "learning_rate", "beta1", "beta2", "eps", "schedule"}));
    RETURN_IF_ERROR(r.Get(node, f, "type", false, &t->optimizer));
    if (t->optimizer != "sgd" && t->optimizer != "adagrad" &&
        t->optimizer != "adam") {
      return r.Error(node["type"], f + ".type",
                     absl::StrCat("unknown table optimizer '", t->optimizer,
                                  "' (expected: sgd, adagrad or adam)"));
    }
  }
  // The type's default, kept unless the section gives eps.
  t->eps = t->optimizer == "adagrad" ? 1e-10 : 1e-8;
  if (!given) return absl::OkStatus();
  if (t->optimizer != "adam") {
    for (const char* key : {"beta1", "beta2"}) {
      if (node[key].IsDefined()) {
        return r.Error(
            node[key], absl::StrCat(f, ".", key),
            absl::StrCat("does not apply to ", f, ".type ", t->optimizer));
      }
    }
  }
  if (t->optimizer == "sgd" && node["eps"].IsDefined()) {
    return r.Error(node["eps"], f + ".eps", "does not apply to sgd");
  }
  RETURN_IF_ERROR(r.Get(node, f, "learning_rate", false, &t->learning_rate));
  if (!(t->learning_rate > 0 && t->learning_rate < 1e9)) {
    return r.Error(node["learning_rate"], f + ".learning_rate", "must be > 0");
  }
  for (auto [key, out] :
       {std::pair{"beta1", &t->beta1}, std::pair{"beta2", &t->beta2}}) {
    RETURN_IF_ERROR(r.Get(node, f, key, false, out));
    if (!(*out >= 0 && *out < 1)) {
      return r.Error(node[key], absl::StrCat(f, ".", key), "must be in [0, 1)");
    }
  }
  RETURN_IF_ERROR(r.Get(node, f, "eps", false, &t->eps));
  if (!(t->eps > 0 && t->eps < 1)) {
    return r.Error(node["eps"], f + ".eps", "must be in (0, 1)");
  }
  return ParseScheduleSection(r, node, f + ".schedule", t->learning_rate,
                              &t->schedule);
}

// The table's admission: {min_count: N} or {probability: p}, one of them.
absl::Status ParseTableAdmission(YamlReader& r, const YAML::Node& node,
                                 const std::string& f, AdmissionConfig* a) {
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  RETURN_IF_ERROR(
      r.CheckMapping(node, f, {"min_count", "probability", "sketch_mib"}));
  if (node["min_count"].IsDefined() == node["probability"].IsDefined()) {
    return r.Error(node, f, "give one of min_count or probability");
  }
  RETURN_IF_ERROR(r.Get(node, f, "min_count", false, &a->min_count));
  if (node["min_count"].IsDefined() &&
      (a->min_count < 2 || a->min_count > 255)) {
    return r.Error(node["min_count"], f + ".min_count",
                   "must be in [2, 255] (1 admits every id: leave "
                   "admission out)");
  }
  RETURN_IF_ERROR(r.Get(node, f, "probability", false, &a->probability));
  if (node["probability"].IsDefined() &&
      !(a->probability > 0 && a->probability < 1)) {
    return r.Error(node["probability"], f + ".probability",
                   "must be in (0, 1)");
  }
  if (node["sketch_mib"].IsDefined() && !node["min_count"].IsDefined()) {
    return r.Error(node["sketch_mib"], f + ".sketch_mib",
                   "applies to min_count only");
  }
  RETURN_IF_ERROR(r.Get(node, f, "sketch_mib", false, &a->sketch_mib));
  if (a->sketch_mib < 1 || a->sketch_mib > 4096) {
    return r.Error(node["sketch_mib"], f + ".sketch_mib",
                   "must be in [1, 4096]");
  }
  return absl::OkStatus();
}

// The table's eviction: {ttl_steps: N} and/or {capacity_rows: N,
// policy: lru|lfu}.
absl::Status ParseTableEviction(YamlReader& r, const YAML::Node& node,
                                const std::string& f, EvictionConfig* e) {
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  RETURN_IF_ERROR(
      r.CheckMapping(node, f, {"ttl_steps", "capacity_rows", "policy"}));
  if (!node["ttl_steps"].IsDefined() && !node["capacity_rows"].IsDefined()) {
    return r.Error(node, f, "give ttl_steps, capacity_rows or both");
  }
  RETURN_IF_ERROR(r.Get(node, f, "ttl_steps", false, &e->ttl_steps));
  if (node["ttl_steps"].IsDefined() && e->ttl_steps < 1) {
    return r.Error(node["ttl_steps"], f + ".ttl_steps", "must be >= 1");
  }
  RETURN_IF_ERROR(r.Get(node, f, "capacity_rows", false, &e->capacity_rows));
  if (node["capacity_rows"].IsDefined() &&
      (e->capacity_rows < 1 || e->capacity_rows >= UINT32_MAX)) {
    return r.Error(node["capacity_rows"], f + ".capacity_rows",
                   "must be in [1, 2^32 - 1) (rows per shard)");
  }
  std::string policy = "lru";
  RETURN_IF_ERROR(r.Get(node, f, "policy", false, &policy));
  if (node["policy"].IsDefined() && !node["capacity_rows"].IsDefined()) {
    return r.Error(node["policy"], f + ".policy",
                   "applies to capacity_rows only");
  }
  if (policy != "lru" && policy != "lfu") {
    return r.Error(
        node["policy"], f + ".policy",
        absl::StrCat("unknown policy '", policy, "' (expected: lru or lfu)"));
  }
  e->lfu = policy == "lfu";
  return absl::OkStatus();
}

// The table's storage: {memory_bytes: B, dir: D}. Beside eviction or
// max_rows it is refused: rows on disk are neither dropped nor counted
// against a limit (each check would read the disk).
absl::Status ParseTableStorage(YamlReader& r, const YAML::Node& table,
                               const std::string& f, StorageConfig* s) {
  const YAML::Node node = table["storage"];
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  RETURN_IF_ERROR(r.CheckMapping(node, f, {"memory_bytes", "dir"}));
  RETURN_IF_ERROR(r.Get(node, f, "dir", true, &s->dir));
  if (s->dir.empty()) {
    return r.Error(node["dir"], f + ".dir", "must not be empty");
  }
  RETURN_IF_ERROR(r.Get(node, f, "memory_bytes", true, &s->memory_bytes));
  if (s->memory_bytes < (1u << 16) || s->memory_bytes > (1ull << 50)) {
    return r.Error(node["memory_bytes"], f + ".memory_bytes",
                   "must be in [65536, 2^50] (bytes of rows in memory per "
                   "shard)");
  }
  for (const char* other : {"eviction", "max_rows"}) {
    if (table[other].IsDefined()) {
      return r.Error(table[other],
                     absl::StrCat(f.substr(0, f.size() - 8), ".", other),
                     "does not apply beside storage (rows on disk are kept "
                     "for good and not counted against a limit)");
    }
  }
  return absl::OkStatus();
}

absl::Status ParseTable(YamlReader& r, const YAML::Node& node,
                        const std::string& f, EmbeddingTableConfig* t) {
  RETURN_IF_ERROR(r.CheckMapping(
      node, f,
      {"name", "rows", "dim", "init", "init_scale", "optimizer", "max_rows",
       "admission", "eviction", "policy", "storage"}));
  RETURN_IF_ERROR(r.Get(node, f, "name", true, &t->name));
  if (t->name.empty()) {
    return r.Error(node["name"], f + ".name", "must not be empty");
  }
  RETURN_IF_ERROR(r.Get(node, f, "rows", true, &t->rows));
  if (t->rows < 1 || t->rows > kMaxTableRows) {
    return r.Error(node["rows"], f + ".rows",
                   "must be in [1, 2^40] (1099511627776)");
  }
  RETURN_IF_ERROR(r.Get(node, f, "dim", true, &t->dim));
  if (t->dim < 1 || t->dim > 4096) {
    return r.Error(node["dim"], f + ".dim", "must be in [1, 4096]");
  }
  RETURN_IF_ERROR(r.Get(node, f, "init", false, &t->init));
  if (t->init != "normal" && t->init != "uniform" && t->init != "zeros") {
    return r.Error(node["init"], f + ".init",
                   absl::StrCat("unknown initialiser '", t->init,
                                "' (expected: normal, uniform or zeros)"));
  }
  RETURN_IF_ERROR(r.Get(node, f, "init_scale", false, &t->init_scale));
  if (!(t->init_scale >= 0 && t->init_scale < 1e6)) {
    return r.Error(node["init_scale"], f + ".init_scale", "must be >= 0");
  }
  RETURN_IF_ERROR(r.Get(node, f, "max_rows", false, &t->max_rows));
  RETURN_IF_ERROR(r.Get(node, f, "policy", false, &t->policy));
  if (!t->policy.empty() && t->policy != "sync" && t->policy != "async" &&
      t->policy != "ssp") {
    return r.Error(node["policy"], f + ".policy",
                   absl::StrCat("unknown policy '", t->policy,
                                "' (expected: async, or the job's "
                                "policy.type)"));
  }
  RETURN_IF_ERROR(ParseTableAdmission(r, node["admission"], f + ".admission",
                                      &t->admission));
  RETURN_IF_ERROR(
      ParseTableEviction(r, node["eviction"], f + ".eviction", &t->eviction));
  RETURN_IF_ERROR(ParseTableStorage(r, node, f + ".storage", &t->storage));
  if (t->max_rows > 0 && t->eviction.capacity_rows >= t->max_rows) {
    return r.Error(node["eviction"]["capacity_rows"],
                   f + ".eviction.capacity_rows",
                   absl::StrCat("must be below max_rows (", t->max_rows,
                                "): max_rows refuses a push, capacity evicts "
                                "after it"));
  }
  return ParseTableOptimizer(r, node["optimizer"], f + ".optimizer", t);
}

// Each table of the list `tables` (model.embeddings), names distinct.
absl::Status ParseTableList(YamlReader& r, const YAML::Node& tables,
                            ModelConfig* out) {
  std::set<std::string> names;
  for (size_t i = 0; i < tables.size(); ++i) {
    const std::string f = absl::StrCat("model.embeddings[", i, "]");
    EmbeddingTableConfig t;
    RETURN_IF_ERROR(ParseTable(r, tables[i], f, &t));
    if (!names.insert(t.name).second) {
      return r.Error(tables[i]["name"], f + ".name",
                     absl::StrCat("table '", t.name, "' is declared twice"));
    }
    out->embeddings.push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::Status ParseConcatFeatures(YamlReader& r, const YAML::Node& model,
                                 ModelConfig* out) {
  const YAML::Node node = model["features"];
  const std::string f = "model.features";
  if (!node.IsDefined() || node.IsNull()) {
    return r.MissingError(model, "model", f,
                          "an embedding_concat model needs features.fields");
  }
  RETURN_IF_ERROR(r.CheckMapping(node, f, {"fields"}));
  RETURN_IF_ERROR(r.Get(node, f, "fields", true, &out->features.fields));
  if (out->features.fields < 1 || out->features.fields > 1024) {
    return r.Error(node["fields"], f + ".fields", "must be in [1, 1024]");
  }
  const int64_t width = int64_t{out->features.fields} * out->embeddings[0].dim;
  if (out->layers.front() != width) {
    return r.Error(model["layers"][0], "model.layers[0]",
                   absl::StrCat("an embedding_concat model's first width "
                                "must be features.fields × dim, ",
                                width));
  }
  return absl::OkStatus();
}

absl::Status ParseFeatures(YamlReader& r, const YAML::Node& node,
                           FeaturesConfig* out) {
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  const std::string f = "model.features";
  RETURN_IF_ERROR(r.CheckMapping(node, f, {"levels", "pairs", "combiner"}));
  RETURN_IF_ERROR(r.Get(node, f, "levels", false, &out->levels));
  if (out->levels < 2 || out->levels > 256) {
    return r.Error(node["levels"], f + ".levels", "must be in [2, 256]");
  }
  RETURN_IF_ERROR(r.Get(node, f, "pairs", false, &out->pairs));
  RETURN_IF_ERROR(r.Get(node, f, "combiner", false, &out->combiner));
  if (out->combiner != "mean" && out->combiner != "sum") {
    return r.Error(node["combiner"], f + ".combiner",
                   absl::StrCat("unknown combiner '", out->combiner,
                                "' (expected: mean or sum)"));
  }
  return absl::OkStatus();
}

// A typed graph's front says its combiner (embedding_bag) or its fields
// (embedding_concat); model.features keeps only how an image becomes ids.
absl::Status ParseTypedFeatures(YamlReader& r, const YAML::Node& model,
                                ModelConfig* out) {
  const YAML::Node node = model["features"];
  if (!node.IsDefined() || node.IsNull()) return absl::OkStatus();
  if (out->type == ModelType::kEmbeddingConcat) {
    return r.Error(node, "model.features",
                   "does not apply to an embedding_concat layer, which names "
                   "its fields (model.layers[0].embedding_concat.fields)");
  }
  if (node.IsMap() && node["combiner"].IsDefined()) {
    return r.Error(node["combiner"], "model.features.combiner",
                   "with typed layers the embedding_bag layer says it "
                   "(model.layers[0].embedding_bag.combiner)");
  }
  return ParseFeatures(r, node, &out->features);
}

absl::Status ParseEmbeddings(YamlReader& r, const YAML::Node& model,
                             ModelConfig* out) {
  const YAML::Node tables = model["embeddings"];
  if (out->type == ModelType::kMlp) {
    for (const char* key : {"embeddings", "features"}) {
      if (model[key].IsDefined()) {
        return r.Error(model[key], absl::StrCat("model.", key),
                       "applies to embedding models only (model.type "
                       "embedding_bag or embedding_concat)");
      }
    }
    return absl::OkStatus();
  }
  if (!tables.IsDefined() || tables.IsNull()) {
    return r.MissingError(model, "model", "model.embeddings",
                          absl::StrCat("an ", ModelTypeName(out->type),
                                       " model needs one table"));
  }
  if (!tables.IsSequence() || tables.size() != 1) {
    return r.Error(tables, "model.embeddings",
                   absl::StrCat("expected a list of exactly one table (an ",
                                ModelTypeName(out->type), " model reads one)"));
  }
  RETURN_IF_ERROR(ParseTableList(r, tables, out));
  if (!out->graph.empty()) return ParseTypedFeatures(r, model, out);
  if (out->type == ModelType::kEmbeddingConcat) {
    return ParseConcatFeatures(r, model, out);
  }
  if (out->layers.front() != out->embeddings[0].dim) {
    return r.Error(model["layers"][0], "model.layers[0]",
                   absl::StrCat("an embedding_bag model's first width must "
                                "be its table's dim, ",
                                out->embeddings[0].dim));
  }
  return ParseFeatures(r, model["features"], &out->features);
}

// A tensors model takes its tensors from a framework's model: none of the
// fields that describe paramd's own layers apply.
absl::Status ParseFrameworkModel(YamlReader& r, const YAML::Node& model,
                                 const PathResolver& resolve,
                                 ModelConfig* out) {
  for (const char* key : {"input", "layers", "features"}) {
    if (model[key].IsDefined()) {
      return r.Error(model[key], absl::StrCat("model.", key),
                     "does not apply to model.type tensors (the framework's "
                     "model defines its layers; model.tensors lists its "
                     "tensors)");
    }
  }
  RETURN_IF_ERROR(ParseTensorsSection(r, model, resolve, out));
  // Tables the framework's model reads by row (paramd.torch.EmbeddingBag).
  const YAML::Node tables = model["embeddings"];
  if (!tables.IsDefined() || tables.IsNull()) return absl::OkStatus();
  if (!tables.IsSequence() || tables.size() > 64) {
    return r.Error(tables, "model.embeddings",
                   "expected a list of at most 64 tables");
  }
  return ParseTableList(r, tables, out);
}

}  // namespace

absl::Status ParseModelSection(YamlReader& r, const YAML::Node& model,
                               const PathResolver& resolve, ModelConfig* out) {
  RETURN_IF_ERROR(
      r.CheckMapping(model, "model",
                     {"type", "input", "layers", "embeddings", "features",
                      "tensors", "tensors_file", "initial_values"}));
  std::string type = "mlp";
  RETURN_IF_ERROR(r.Get(model, "model", "type", false, &type));
  if (type == "mlp") {
    out->type = ModelType::kMlp;
  } else if (type == "embedding_bag") {
    out->type = ModelType::kEmbeddingBag;
  } else if (type == "embedding_concat") {
    out->type = ModelType::kEmbeddingConcat;
  } else if (type == "tensors") {
    out->type = ModelType::kTensors;
    return ParseFrameworkModel(r, model, resolve, out);
  } else {
    return r.Error(model["type"], "model.type",
                   absl::StrCat("unknown model type '", type,
                                "' (expected: mlp, embedding_bag, "
                                "embedding_concat or tensors)"));
  }
  for (const char* key : {"tensors", "tensors_file", "initial_values"}) {
    if (model[key].IsDefined()) {
      return r.Error(model[key], absl::StrCat("model.", key),
                     "applies to model.type tensors only");
    }
  }
  RETURN_IF_ERROR(ParseLayers(r, model, out));
  RETURN_IF_ERROR(ParseEmbeddings(r, model, out));
  if (out->graph.empty()) return absl::OkStatus();
  return ParseLayerGraph(r, model, out);
}

}  // namespace paramd
