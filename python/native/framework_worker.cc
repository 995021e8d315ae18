#include "python/native/framework_worker.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/config/job_file.h"
#include "common/launch/slurm.h"
#include "spdlog/spdlog.h"
#include "worker/retry.h"
#include "worker/rpc/grpc_parameter_client.h"

namespace paramd {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// A tensor's shape, and "(statistic)" after a statistic's.
std::string Described(const std::vector<int64_t>& shape, bool statistic) {
  return absl::StrCat(ShapeText(shape), statistic ? " (statistic)" : "");
}

}  // namespace

absl::StatusOr<std::unique_ptr<FrameworkWorker>> FrameworkWorker::Create(
    const FrameworkWorkerOptions& options) {
  GrpcClientOptions client;
  client.launch = options.launch;
  client.backups = options.backups;
  return Create(options,
                GrpcParameterClientFactory(options.servers, std::move(client)));
}

absl::StatusOr<std::unique_ptr<FrameworkWorker>> FrameworkWorker::Create(
    const FrameworkWorkerOptions& options,
    const ParameterClientFactory& make_client) {
  ASSIGN_OR_RETURN(JobConfig config, LoadJobConfig(options.job));
  if (config.model.type != ModelType::kTensors) {
    return absl::InvalidArgumentError(absl::StrCat(
        config.path, ": model.type is ", ModelTypeName(config.model.type),
        "; a framework worker trains model.type tensors jobs (paramd-worker "
        "trains the others)"));
  }
  if (options.rank < 0 || options.rank >= config.num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: ", options.rank, " is outside [0, ",
                     config.num_workers, ") for the job's cluster.workers"));
  }
  if (config.servers_from_etcd && options.servers.empty()) {
    return absl::InvalidArgumentError(
        "cluster.servers {etcd: N}: a framework's worker does not read etcd "
        "yet; pass the servers (pt.init(servers=...), or PARAMD_SERVERS as "
        "paramctl run does)");
  }
  if (config.servers_from_slurm && options.servers.empty()) {
    RETURN_IF_ERROR(ResolveSlurmServers(&config, ProcessEnv()));
  }
  std::unique_ptr<FrameworkWorker> w(
      new FrameworkWorker(std::move(config), options.rank, make_client));
  // A model still to be declared has no plan yet: Declare builds it.
  if (!w->config_.awaits_declaration()) RETURN_IF_ERROR(w->Build());
  return w;
}

FrameworkWorker::FrameworkWorker(JobConfig config, int rank,
                                 ParameterClientFactory make_client)
    : config_(std::move(config)),
      rank_(rank),
      make_client_(std::move(make_client)),
      spec_(BuildModelSpec(config_.model)),
      layout_(spec_) {}

absl::Status FrameworkWorker::Build() {
  ASSIGN_OR_RETURN(
      PartitionPlan plan,
      PartitionPlan::Build(spec_, config_.chunk_bytes, config_.num_shards()));
  plan_ = std::make_unique<PartitionPlan>(std::move(plan));
  trace_ =
      std::make_unique<WorkerTimeline>(config_, rank_, plan_->num_shards());
  ClientSetup setup{&config_, plan_.get(), &layout_, rank_};
  setup.on_trace = trace_->OnTrace();
  ASSIGN_OR_RETURN(client_, make_client_(setup));
  heartbeats_ = std::make_unique<Heartbeats>(
      client_.get(), absl::Seconds(config_.liveness.heartbeat_seconds));
  return absl::OkStatus();
}

absl::Status FrameworkWorker::Declare(const std::string& declaration) {
  if (!config_.awaits_declaration()) {
    return absl::FailedPreconditionError(absl::StrCat(
        config_.path,
        config_.declaration.empty()
            ? " has the model (model.tensors and an optimizer section): "
              "there is nothing to declare"
            : ": this worker declared its model already"));
  }
  ASSIGN_OR_RETURN(JobConfig declared, WithDeclaredModel(config_, declaration));
  config_ = std::move(declared);
  spec_ = BuildModelSpec(config_.model);
  layout_ = FlatLayout(spec_);
  return Build();
}

absl::Status FrameworkWorker::Ready(const char* what) const {
  if (client_ != nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(what, ": ", config_.path,
                   " leaves the model to its workers: declare it first"));
}

absl::StatusOr<uint64_t> FrameworkWorker::Register() {
  if (config_.declaration.empty()) return client_->Register();
  // Declared every time: a shard that restarted without its checkpoints
  // waits for the model again. A shard that takes a declaration moves
  // from the server that waited for it to the one that serves it, on the
  // same port: a registration that meets the move fails UNAVAILABLE (or
  // is told the shard still waits) and is tried again.
  RetryOptions retry;
  retry.give_up = absl::Seconds(config_.liveness.give_up_seconds);
  retry.who = absl::StrCat("rank ", rank_);
  return Retry("Register", retry, [this]() -> absl::StatusOr<uint64_t> {
    RETURN_IF_ERROR(client_->DeclareModel(config_.declaration));
    return client_->Register();
  });
}

FrameworkWorker::~FrameworkWorker() = default;

absl::Status FrameworkWorker::CheckFlat(const char* what, size_t floats) const {
  if (static_cast<int64_t>(floats) == layout_.total) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": ", floats, " floats for the job's ", layout_.total));
}

absl::Status FrameworkWorker::CheckTensors(
    const std::vector<DeclaredTensor>& tensors) const {
  const size_t n = std::min(tensors.size(), spec_.tensors.size());
  for (size_t i = 0; i < n; ++i) {
    const TensorSpec& want = spec_.tensors[i];
    const DeclaredTensor& got = tensors[i];
    const bool statistic = want.kind == TensorKind::kStatistic;
    if (got.name != want.name || got.shape != want.shape ||
        got.statistic != statistic) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model's tensor ", i, " is '", got.name, "' ",
          Described(got.shape, got.statistic), " but the job's model.tensors[",
          i, "] is '", want.name, "' ", Described(want.shape, statistic), " (",
          config_.path,
          "; python3 -m paramd.torch.spec writes the list from the model)"));
    }
  }
  if (tensors.size() != spec_.tensors.size()) {
    const bool extra = tensors.size() > spec_.tensors.size();
    return absl::InvalidArgumentError(
        absl::StrCat("the model has ", tensors.size(), " tensors and the job ",
                     spec_.tensors.size(), ": ",
                     extra ? absl::StrCat("the model's '", tensors[n].name,
                                          "' is not in the job's model.tensors")
                           : absl::StrCat("the job's '", spec_.tensors[n].name,
                                          "' is not in the model"),
                     " (", config_.path, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FrameworkWorker::Join(absl::Span<float> params) {
  ASSIGN_OR_RETURN(uint64_t clock, Register());
  RETURN_IF_ERROR(client_->Pull(clock, params).status());
  heartbeats_->SetClock(clock);
  return clock;
}

absl::StatusOr<uint64_t> FrameworkWorker::Start(absl::Span<float> params) {
  RETURN_IF_ERROR(Ready("start"));
  RETURN_IF_ERROR(CheckFlat("params", params.size()));
  ASSIGN_OR_RETURN(uint64_t clock, Join(params));
  heartbeats_->Start();
  return clock;
}

absl::Status FrameworkWorker::SendInitialValues(
    absl::Span<const float> params) {
  if (!config_.model.initial_values_from_rank0) {
    return absl::FailedPreconditionError(absl::StrCat(
        config_.path,
        ": model.initial_values is servers: the servers draw "
        "the initial values; set model.initial_values: rank0 to send rank "
        "0's"));
  }
  if (rank_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": only rank 0 sends initial values"));
  }
  RETURN_IF_ERROR(Ready("send_initial_values"));
  RETURN_IF_ERROR(CheckFlat("params", params.size()));
  RETURN_IF_ERROR(Register().status());
  return client_->Initialize(params);
}

absl::StatusOr<uint64_t> FrameworkWorker::Step(absl::Span<const float> grads,
                                               float loss,
                                               absl::Span<float> params) {
  RETURN_IF_ERROR(Ready("step"));
  RETURN_IF_ERROR(CheckFlat("grads", grads.size()));
  RETURN_IF_ERROR(CheckFlat("params", params.size()));
  const uint64_t clock = this->clock();
  // The timeline reads the clock only around traced steps.
  const bool traced = trace_->Wants(clock);
  const absl::Time begin = traced ? absl::Now() : absl::InfinitePast();
  StepRequest request{clock, grads, loss, params};
  for (size_t t = 0; t < row_ids_.size(); ++t) {
    if (row_ids_[t].empty()) continue;
    request.rows.push_back(
        RowGradients{static_cast<uint32_t>(t), row_ids_[t], row_grads_[t]});
  }
  request.timed = traced;
  absl::StatusOr<StepReport> report = client_->Step(std::move(request));
  absl::Status s = report.status();
  if (s.ok()) {
    call_times_ = std::move(report->times);
    if (traced) AddStep(clock, begin, report->version, grads.size());
    last_step_end_ =
        trace_->Wants(clock + 1) ? absl::Now() : absl::InfinitePast();
    trace_->WriteIfDone(clock + 1);
    heartbeats_->SetClock(clock + 1);
    return clock + 1;
  }
  if (!absl::IsAborted(s)) return s;
  // A shard no longer knows the rank: this gradient is not applied.
  spdlog::warn("rank {}: {}; registering again", rank_,
               std::string(s.message()));
  return Join(params);
}

void FrameworkWorker::AddStep(uint64_t clock, absl::Time push_begin,
                              uint64_t version, size_t floats) {
  const absl::Time end = absl::Now();
  // What the framework did between two steps: its data, forward and
  // backward (known once the step before was traced too).
  const absl::Time began =
      last_step_end_ == absl::InfinitePast() ? push_begin : last_step_end_;
  if (began < push_begin) {
    trace_->Add("compute", 0, began, push_begin, clock);
  }
  trace_->Add("push+pull", 0, push_begin, end, clock,
              absl::StrCat("\"version\":", version,
                           ",\"bytes\":", floats * sizeof(float)));
  trace_->Add("step", 0, began, end, clock);
  trace_->AddShardCalls(clock, call_times_);
}

absl::Status FrameworkWorker::CheckRows(const char* what, uint32_t table,
                                        absl::Span<const uint64_t> ids,
                                        size_t values) const {
  if (table >= config_.model.embeddings.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": table ", table, " is not in the job's ",
                     config_.model.embeddings.size(), " model.embeddings"));
  }
  const EmbeddingTableConfig& t = config_.model.embeddings[table];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= t.rows || (i > 0 && ids[i] <= ids[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": ids of table '", t.name,
                       "' must be sorted, distinct and below its ", t.rows,
                       " rows; id ", i, " is ", ids[i]));
    }
  }
  if (values != ids.size() * static_cast<size_t>(t.dim)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", values, " floats for ", ids.size(),
                     " rows of table '", t.name, "' (dim ", t.dim, ")"));
  }
  return absl::OkStatus();
}

absl::Status FrameworkWorker::PullRows(uint32_t table,
                                       absl::Span<const uint64_t> ids,
                                       absl::Span<float> out) {
  RETURN_IF_ERROR(Ready("pull_rows"));
  RETURN_IF_ERROR(CheckRows("pull_rows", table, ids, out.size()));
  if (ids.empty()) return absl::OkStatus();
  return client_->PullRows(clock(), table, ids, out);
}

absl::Status FrameworkWorker::SetRowGradients(uint32_t table,
                                              absl::Span<const uint64_t> ids,
                                              absl::Span<const float> grads) {
  RETURN_IF_ERROR(CheckRows("set_row_gradients", table, ids, grads.size()));
  if (row_ids_.size() <= table) {
    row_ids_.resize(table + 1);
    row_grads_.resize(table + 1);
  }
  row_ids_[table].assign(ids.begin(), ids.end());
  row_grads_[table].assign(grads.begin(), grads.end());
  return absl::OkStatus();
}

absl::Status FrameworkWorker::ReportEpoch(const EpochReport& report) {
  RETURN_IF_ERROR(Ready("report_epoch"));
  return client_->ReportEpoch(report);
}

void FrameworkWorker::Finish() {
  if (client_ == nullptr) return;  // Never declared: nothing started.
  trace_->Write();
  // Once, and only for a rank that started.
  if (heartbeats_->Stop()) {
    client_->Heartbeat(clock(), /*finished=*/true, absl::Seconds(5));
  }
}

uint64_t FrameworkWorker::clock() const {
  return heartbeats_ != nullptr ? heartbeats_->clock() : 0;
}

}  // namespace paramd
