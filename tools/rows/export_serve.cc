#include "tools/rows/export_serve.h"

#include <cstdio>
#include <memory>

#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "server/checkpoint/file_system.h"
#include "tools/ctl/export_job.h"
#include "tools/serve/served_model.h"

namespace paramd {

absl::Status ExportAndServe(const JobConfig& config,
                            const std::vector<std::string>& addresses,
                            const std::string& dir) {
  ExportOptions options;
  options.addresses = addresses;
  options.out = dir;
  absl::Time start = absl::Now();
  ASSIGN_OR_RETURN(const ExportSummary done,
                   ExportJob(config, options, LocalFileSystem()));
  const double export_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double mb = (done.rows * (8 + 4.0 * config.model.embeddings[0].dim) +
                     4.0 * done.tensor_values) /
                    1e6;
  start = absl::Now();
  ASSIGN_OR_RETURN(std::unique_ptr<ServedModel> model,
                   ServedModel::Load(LocalFileSystem(), dir));
  const double load_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::vector<uint64_t> ids(100000);
  uint64_t x = 88172645463325252ull;
  for (uint64_t& id : ids) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    id = x % config.model.embeddings[0].rows;
  }
  std::vector<float> rows;
  start = absl::Now();
  RETURN_IF_ERROR(
      model->Lookup(config.model.embeddings[0].name, ids, &rows).status());
  const double lookup_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf(
      "export: %llu rows and %llu tensor values (%.1f MB) from %zu "
      "server(s) in %.1f s (%.0f MB/s: reading the pages %.1f s, merging "
      "the shards' rows %.1f s, writing %.1f s) to %s; loaded as "
      "paramd-serve does in %.1f s; 100,000 random lookups %.2f us each\n",
      static_cast<unsigned long long>(done.rows),
      static_cast<unsigned long long>(done.tensor_values), mb,
      options.addresses.size(), export_seconds, mb / export_seconds,
      done.read_seconds, done.order_seconds, done.write_seconds,
      done.manifest.c_str(), load_seconds, lookup_seconds * 1e6 / ids.size());
  return absl::OkStatus();
}

}  // namespace paramd
