#include "tests/test_files.h"

#include <stdlib.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/job_file.h"

namespace paramd::testing {

std::string NewTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl =
      absl::StrCat(base != nullptr ? base : "/tmp", "/paramd-test-XXXXXX");
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

std::string WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  REQUIRE(out.good());
  return path;
}

void WriteIdx(const std::string& path, const std::vector<int64_t>& dims,
              const std::vector<uint8_t>& data, bool gzip) {
  std::string bytes = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (int64_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      bytes.push_back(static_cast<char>((d >> shift) & 0xFF));
    }
  }
  bytes.append(data.begin(), data.end());
  if (!gzip) {
    WriteFile(path, bytes);
    return;
  }
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
          static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void UsePixelsTable(JobOptions* o, const std::string& optimizer) {
  o->model_type = "embedding_bag";
  o->layers = "[8, 16, 10]";
  o->model_extra = absl::StrCat(
      "  embeddings:\n"
      "    - name: pixels\n"
      "      rows: 1048576\n"
      "      dim: 8\n"
      "      init_scale: 0.1\n"
      "      optimizer: ",
      optimizer, "\n");
}

std::string JobYaml(const JobOptions& o) {
  std::vector<std::string> quoted;
  for (const auto& s : o.servers) quoted.push_back(absl::StrCat("\"", s, "\""));
  return absl::StrCat(
      "job:\n  id: test-job\n  seed: ", o.seed, "\n", "cluster:\n  servers: [",
      absl::StrJoin(quoted, ", "), "]\n  workers: ", o.workers, "\n",
      "model:\n  type: ", o.model_type, "\n",
      o.layers.empty() ? "" : absl::StrCat("  layers: ", o.layers, "\n"),
      o.model_extra, "data:\n",
      o.data.empty() ? absl::StrCat("  dir: ", kFashionMnistDir,
                                    "\n  train_limit: ", o.train_limit,
                                    "\n  test_limit: ", o.test_limit, "\n")
                     : o.data,
      "training:\n  epochs: ", o.epochs, "\n  batch_size: ", o.batch_size,
      "\n  shuffle: ", o.shuffle ? "true" : "false", "\n",
      "optimizer:\n  type: sgd\n  learning_rate: ", o.learning_rate,
      "\n  momentum: ", o.momentum, "\n", "policy:\n  type: ", o.policy, "\n",
      o.policy == "ssp" ? absl::StrCat("  staleness: ", o.staleness, "\n") : "",
      "liveness:\n  lease_seconds: ", o.lease_seconds,
      "\n  heartbeat_seconds: ", o.heartbeat_seconds,
      "\n  stall_warn_seconds: ", o.stall_warn_seconds, "\n",
      "partition:\n  chunk_bytes: ", o.chunk_bytes, "\n");
}

std::string JobYamlError(const std::string& yaml, std::string* path_out) {
  const std::string path = WriteFile(NewTempDir() + "/job.yaml", yaml);
  if (path_out != nullptr) *path_out = path;
  absl::StatusOr<JobConfig> c = LoadJobConfig(path);
  return c.ok() ? "" : std::string(c.status().message());
}

JobConfig MakeJob(const JobOptions& options, const std::string& dir) {
  const std::string path =
      WriteFile(absl::StrCat(dir, "/job.yaml"), JobYaml(options));
  absl::StatusOr<JobConfig> config = LoadJobConfig(path);
  INFO(config.status().ToString());
  REQUIRE(config.ok());
  return *config;
}

}  // namespace paramd::testing
