// Test helpers without gRPC: scratch files, IDX files and job files.
#ifndef PARAMD_TESTS_TEST_FILES_H_
#define PARAMD_TESTS_TEST_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/job_config.h"

namespace paramd::testing {

// A fresh folder under the test's scratch space.
std::string NewTempDir();

// The whole of `path`; empty when it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// Writes `content` to `path`, failing the test on error; returns path.
std::string WriteFile(const std::string& path, const std::string& content);

// Writes an unsigned-byte IDX file, gzip-compressed when `gzip`.
void WriteIdx(const std::string& path, const std::vector<int64_t>& dims,
              const std::vector<uint8_t>& data, bool gzip);

// Where Debian's dataset-fashion-mnist puts the data.
constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

struct JobOptions {
  std::vector<std::string> servers = {"127.0.0.1:0", "127.0.0.1:0"};
  int workers = 2;
  std::string layers = "[784, 64, 10]";  // Empty: no model.layers.
  std::string model_type = "mlp";
  // More keys of the model section (indented two spaces), e.g. embeddings.
  std::string model_extra;
  // The data section's keys (indented two spaces); empty: Fashion-MNIST
  // with train_limit and test_limit.
  std::string data;
  int epochs = 2;
  int batch_size = 32;
  bool shuffle = true;
  int64_t train_limit = 2048;
  int64_t test_limit = 512;
  double learning_rate = 0.05;
  double momentum = 0.9;
  int64_t chunk_bytes = 16384;
  uint64_t seed = 7;
  std::string policy = "sync";  // or "async", "ssp"
  int staleness = 2;            // ssp only
  double lease_seconds = 10;
  double heartbeat_seconds = 1;
  double stall_warn_seconds = 30;
};

// Makes `o`'s model an embedding_bag over a table "pixels" of 2^20 rows
// of dim 8 (init_scale 0.1) into layers [8, 16, 10], the table trained by
// `optimizer` (a flow mapping, e.g. "{type: adam, learning_rate: 0.02}").
void UsePixelsTable(JobOptions* o, const std::string& optimizer);

// The YAML text of a job on real Fashion-MNIST with these options.
std::string JobYaml(const JobOptions& options);

// Parses JobYaml(options) written to a file in `dir`; fails the test on error.
JobConfig MakeJob(const JobOptions& options, const std::string& dir);

// Loads `yaml` from a job file in a fresh folder (whose path `path_out`,
// when given, receives), and returns the error message ("" if it loads).
std::string JobYamlError(const std::string& yaml,
                         std::string* path_out = nullptr);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_TEST_FILES_H_
