// The job file's `data` section: what format the data files have (IDX images,
// or click logs), where the training and test files are, how many samples to
// use, and the training batches' augmentation. Declared in
// common/config/job_sections.h, called by the job-file parser.

#include <fstream>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/job_sections.h"

namespace paramd {
namespace {

absl::Status ParseAugment(YamlReader& r, const YAML::Node& data,
                          AugmentConfig* out) {
  const YAML::Node a = data["augment"];
  if (!a.IsDefined() || a.IsNull()) return absl::OkStatus();
  RETURN_IF_ERROR(r.CheckMapping(a, "data.augment", {"crop_padding", "flip"}));
  RETURN_IF_ERROR(
      r.Get(a, "data.augment", "crop_padding", false, &out->crop_padding));
  if (out->crop_padding < 0 || out->crop_padding > kMaxCropPadding) {
    return r.Error(a["crop_padding"], "data.augment.crop_padding",
                   absl::StrCat("must be 0 (no crop) to ", kMaxCropPadding,
                                " pixels of padding on each side; got ",
                                out->crop_padding));
  }
  return r.Get(a, "data.augment", "flip", false, &out->flip);
}

absl::Status ParseClickFiles(YamlReader& r, const YAML::Node& data,
                             const PathResolver& resolve, bool check_readable,
                             DataConfig* out) {
  for (const char* key : {"dir", "train_images", "train_labels", "test_images",
                          "test_labels", "augment"}) {
    if (data[key].IsDefined()) {
      return r.Error(data[key], absl::StrCat("data.", key),
                     "applies to data.format idx (images), not clicks");
    }
  }
  for (auto [key, required, path] :
       {std::tuple{"train_file", true, &out->train_file},
        std::tuple{"test_file", false, &out->test_file}}) {
    RETURN_IF_ERROR(r.Get(data, "data", key, required, path));
    if (path->empty()) continue;
    *path = resolve(*path);
    if (check_readable && !std::ifstream(*path, std::ios::binary).good()) {
      return r.Error(data[key], absl::StrCat("data.", key),
                     absl::StrCat("cannot read '", *path, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseDataSection(YamlReader& r, const YAML::Node& data,
                              const PathResolver& resolve, bool check_readable,
                              DataConfig* out) {
  std::string format = "idx";
  RETURN_IF_ERROR(r.Get(data, "data", "format", false, &format));
  if (format != "idx" && format != "clicks") {
    return r.Error(data["format"], "data.format",
                   absl::StrCat("unknown format '", format,
                                "' (expected: idx or clicks)"));
  }
  for (auto [key, limit] : {std::pair{"train_limit", &out->train_limit},
                            std::pair{"test_limit", &out->test_limit}}) {
    RETURN_IF_ERROR(r.Get(data, "data", key, false, limit));
    if (*limit < 0) {
      return r.Error(data[key], absl::StrCat("data.", key),
                     "must be >= 0 (0 means all samples)");
    }
  }
  if (format == "clicks") {
    out->format = DataFormat::kClicks;
    return ParseClickFiles(r, data, resolve, check_readable, out);
  }
  for (const char* key : {"train_file", "test_file"}) {
    if (data[key].IsDefined()) {
      return r.Error(data[key], absl::StrCat("data.", key),
                     "applies to data.format clicks (images are "
                     "data.train_images and data.train_labels)");
    }
  }
  std::string dir = kDefaultDataDir;
  RETURN_IF_ERROR(r.Get(data, "data", "dir", false, &dir));
  dir = resolve(dir);
  struct File {
    const char* key;
    const char* default_name;
    std::string* out;
  };
  const File files[] = {
      {"train_images", "train-images-idx3-ubyte.gz", &out->train_images},
      {"train_labels", "train-labels-idx1-ubyte.gz", &out->train_labels},
      {"test_images", "t10k-images-idx3-ubyte.gz", &out->test_images},
      {"test_labels", "t10k-labels-idx1-ubyte.gz", &out->test_labels},
  };
  for (const File& f : files) {
    std::string name = f.default_name;
    RETURN_IF_ERROR(r.Get(data, "data", f.key, false, &name));
    *f.out = name[0] == '/' ? name : absl::StrCat(dir, "/", name);
    if (!check_readable) continue;
    std::ifstream probe(*f.out, std::ios::binary);
    if (!probe.good()) {
      // Point at the key when given, else at `data.dir` (or the section).
      const YAML::Node at = data[f.key].IsDefined()   ? data[f.key]
                            : data["dir"].IsDefined() ? data["dir"]
                                                      : data;
      return r.Error(
          at, absl::StrCat("data.", f.key),
          absl::StrCat("cannot read '", *f.out,
                       "' (install dataset-fashion-mnist or set data.dir)"));
    }
  }
  return ParseAugment(r, data, &out->augment);
}

}  // namespace paramd
