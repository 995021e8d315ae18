#include "tools/rows/rows_bench_worker.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/status_macros.h"
#include "common/model/model_spec.h"
#include "common/model/partitioner.h"
#include "common/model/rows.h"
#include "tools/bench/proc_status.h"
#include "worker/model/blas.h"
#include "worker/model/sequential.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd {
namespace {

// The fields of one batch as the model sees them.
struct BatchRows {
  std::vector<uint64_t> ids;     // batch × fields
  std::vector<uint64_t> unique;  // Sorted, distinct.
  std::vector<uint32_t> local;   // Each id's place in unique.
  std::vector<float> rows;       // unique × dim
  std::vector<float> grads;      // unique × dim
  std::vector<float> x;          // batch × fields × dim
  std::vector<int32_t> y;
  double teacher_loss = 0;
};

void MakeBatch(const ClickLog& log, uint64_t first, int n, BatchRows* b) {
  const int fields = log.fields();
  std::vector<uint32_t> values(fields);
  b->ids.resize(static_cast<size_t>(n) * fields);
  b->y.resize(n);
  b->teacher_loss = 0;
  for (int s = 0; s < n; ++s) {
    double loss = 0;
    b->y[s] = log.Sample(first + s, values.data(), &loss);
    b->teacher_loss += loss;
    for (int f = 0; f < fields; ++f) {
      b->ids[static_cast<size_t>(s) * fields + f] =
          ClickLog::RowOf(f, values[f]);
    }
  }
  DeduplicateIds(b->ids, &b->unique, &b->local);
}

}  // namespace

std::string RowsWorkerResult::ToJson() const {
  return absl::StrCat(
      "{\"steps\": ", steps, ", \"seconds\": ", seconds,
      ", \"pull_seconds\": ", pull_seconds,
      ", \"step_seconds\": ", step_seconds, ", \"rows_pulled\": ", rows_pulled,
      ", \"ids\": ", ids, ", \"bytes_pulled\": ", bytes_pulled,
      ", \"bytes_pushed\": ", bytes_pushed, ", \"final_loss\": ", final_loss,
      ", \"teacher_loss\": ", teacher_loss, ", \"first_loss\": ", first_loss,
      ", \"peak_rss_bytes\": ", peak_rss_bytes, "}");
}

absl::StatusOr<RowsWorkerResult> RowsWorkerResult::FromJson(
    const std::string& json) {
  // The flat object ToJson writes: "key": number pairs.
  RowsWorkerResult r;
  std::string body = json;
  body.erase(
      std::remove_if(
          body.begin(), body.end(),
          [](char c) { return c == '{' || c == '}' || c == '"' || c == ' '; }),
      body.end());
  for (absl::string_view pair : absl::StrSplit(body, ',')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(pair, ':');
    double v = 0;
    if (!absl::SimpleAtod(kv.second, &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker result: bad value in '", pair, "'"));
    }
    const std::string& k = kv.first;
    if (k == "steps") r.steps = static_cast<int64_t>(v);
    if (k == "seconds") r.seconds = v;
    if (k == "pull_seconds") r.pull_seconds = v;
    if (k == "step_seconds") r.step_seconds = v;
    if (k == "rows_pulled") r.rows_pulled = static_cast<int64_t>(v);
    if (k == "ids") r.ids = static_cast<int64_t>(v);
    if (k == "bytes_pulled") r.bytes_pulled = static_cast<int64_t>(v);
    if (k == "bytes_pushed") r.bytes_pushed = static_cast<int64_t>(v);
    if (k == "final_loss") r.final_loss = v;
    if (k == "teacher_loss") r.teacher_loss = v;
    if (k == "first_loss") r.first_loss = v;
    if (k == "peak_rss_bytes") r.peak_rss_bytes = static_cast<int64_t>(v);
  }
  return r;
}

namespace {

// x: each sample's fields' rows side by side.
void ConcatRows(int dim, BatchRows* b) {
  b->x.resize(b->ids.size() * dim);
  for (size_t i = 0; i < b->ids.size(); ++i) {
    std::copy_n(&b->rows[static_cast<size_t>(b->local[i]) * dim], dim,
                &b->x[i * dim]);
  }
}

// Each distinct row's gradient: the sum over the places it stands in x.
void ScatterRowGradients(absl::Span<const float> dx, int dim, BatchRows* b) {
  b->grads.assign(b->unique.size() * dim, 0.0f);
  for (size_t i = 0; i < b->ids.size(); ++i) {
    float* g = &b->grads[static_cast<size_t>(b->local[i]) * dim];
    for (int d = 0; d < dim; ++d) g[d] += dx[i * dim + d];
  }
}

// One step's rows and bytes, counted.
void CountStep(const BatchRows& b, int dim, RowsWorkerResult* result) {
  ++result->steps;
  result->rows_pulled += static_cast<int64_t>(b.unique.size());
  result->ids += static_cast<int64_t>(b.ids.size());
  result->bytes_pulled += static_cast<int64_t>(b.rows.size() * 4);
  result->bytes_pushed += static_cast<int64_t>(b.unique.size() * (8 + dim * 4));
}

// The mean losses of the first and last tenth of the steps, the teacher's
// over the last tenth.
void SummarizeLosses(const std::vector<double>& losses,
                     const std::vector<double>& teacher,
                     RowsWorkerResult* result) {
  const size_t tenth = std::max<size_t>(1, losses.size() / 10);
  auto mean = [](const std::vector<double>& v, size_t begin, size_t end) {
    double s = 0;
    for (size_t i = begin; i < end; ++i) s += v[i];
    return end > begin ? s / (end - begin) : 0.0;
  };
  result->first_loss = mean(losses, 0, tenth);
  result->final_loss = mean(losses, losses.size() - tenth, losses.size());
  result->teacher_loss = mean(teacher, losses.size() - tenth, losses.size());
}

}  // namespace

absl::StatusOr<RowsWorkerResult> RunRowsWorker(
    const JobConfig& config, const std::vector<std::string>& servers,
    const ClickLogOptions& log_options, const RowsWorkerOptions& options) {
  const ClickLog log(log_options);
  const int dim = config.model.embeddings[0].dim;
  if (config.model.type != ModelType::kEmbeddingConcat ||
      config.model.features.fields != log.fields()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config.path,
                     ": rows_bench needs an embedding_concat "
                     "model with features.fields ",
                     log.fields()));
  }
  const ModelSpec spec = BuildModelSpec(config.model);
  ASSIGN_OR_RETURN(
      PartitionPlan plan,
      PartitionPlan::Build(spec, config.chunk_bytes, config.num_shards()));
  const FlatLayout layout(spec);
  GrpcClientOptions client_options;
  client_options.launch = "rows-bench";
  ASSIGN_OR_RETURN(std::unique_ptr<ParameterClient> client,
                   GrpcParameterClientFactory(servers, client_options)(
                       ClientSetup{&config, &plan, &layout, options.rank}));
  ASSIGN_OR_RETURN(const Blas* blas, LoadBlas(config.worker.blas_core));
  ASSIGN_OR_RETURN(std::unique_ptr<CpuSequential> mlp_model,
                   CpuSequential::Mlp(config.model.layers, options.batch,
                                      config.worker.threads, blas));
  CpuSequential& mlp = *mlp_model;
  RETURN_IF_ERROR(mlp.EnableInputGradient());

  ASSIGN_OR_RETURN(uint64_t clock, client->Register());
  std::vector<float> params(layout.total);
  RETURN_IF_ERROR(client->Pull(clock, absl::MakeSpan(params)).status());

  const int workers = config.num_workers;
  const int64_t steps = options.samples / (int64_t{options.batch} * workers);
  if (steps < 1) {
    return absl::InvalidArgumentError(
        "rows_bench: --samples must cover one batch per worker");
  }
  RowsWorkerResult result;
  BatchRows b;
  std::vector<double> losses, teacher;
  const absl::Time start = absl::Now();
  for (int64_t step = 0; step < steps; ++step) {
    const uint64_t first =
        (static_cast<uint64_t>(step) * workers + options.rank) * options.batch;
    MakeBatch(log, first, options.batch, &b);
    b.rows.resize(b.unique.size() * dim);
    const absl::Time pull_start = absl::Now();
    RETURN_IF_ERROR(
        client->PullRows(clock, 0, b.unique, absl::MakeSpan(b.rows)));
    result.pull_seconds += absl::ToDoubleSeconds(absl::Now() - pull_start);
    ConcatRows(dim, &b);
    const absl::Span<float> grads = client->GradientBuffer();
    ASSIGN_OR_RETURN(double loss,
                     mlp.ComputeGradients(params, b.x.data(), b.y.data(),
                                          options.batch, grads));
    ScatterRowGradients(mlp.InputGradient(), dim, &b);
    client->SetRowGradients(0, b.unique, b.grads);
    const absl::Time push_start = absl::Now();
    ASSIGN_OR_RETURN(uint64_t version,
                     client->PushPull(clock, grads, static_cast<float>(loss),
                                      absl::MakeSpan(params)));
    (void)version;
    result.step_seconds += absl::ToDoubleSeconds(absl::Now() - push_start);
    ++clock;
    CountStep(b, dim, &result);
    losses.push_back(loss);
    teacher.push_back(b.teacher_loss / options.batch);
  }
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  client->Heartbeat(clock, /*finished=*/true, absl::Seconds(5));
  SummarizeLosses(losses, teacher, &result);
  result.peak_rss_bytes = PeakRssBytes(0);
  return result;
}

}  // namespace paramd
