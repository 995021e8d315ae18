#include "tests/in_process_client.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/model/rows.h"
#include "common/wire/wire_format.h"
#include "tests/whole_push.h"
#include "worker/rpc/proto_convert.h"

namespace paramd::testing {
namespace {

absl::Status Prefixed(const absl::Status& s, const char* rpc, int shard) {
  return absl::Status(
      s.code(), absl::StrCat(rpc, " to shard ", shard, ": ", s.message()));
}

class InProcessClient final : public ParameterClient {
 public:
  InProcessClient(const ClientSetup& setup, std::vector<Shard*> shards,
                  InProcessCluster::Calls* calls, bool run_while_waiting)
      : config_(*setup.config),
        plan_(*setup.plan),
        layout_(*setup.layout),
        rank_(setup.rank),
        shards_(std::move(shards)),
        calls_(calls),
        run_while_waiting_(run_while_waiting),
        gradients_(setup.layout->total) {}

  absl::StatusOr<uint64_t> Register() override {
    ASSIGN_OR_RETURN(uint64_t clock,
                     RegisterInTwoPhases([this](bool join, uint64_t clock) {
                       return RegisterPhase(join, clock);
                     }));
    ++calls_->registrations;
    return clock;
  }

  absl::StatusOr<uint64_t> Pull(uint64_t clock,
                                absl::Span<float> params) override {
    uint64_t version = UINT64_MAX;
    for (int k = 0; k < static_cast<int>(shards_.size()); ++k) {
      proto::PullRequest request;
      request.set_job_id(config_.job_id);
      request.set_rank(rank_);
      request.set_clock(clock);
      std::shared_ptr<const ParamSnapshot> snapshot;
      absl::Status s = shards_[k]->Pull(
          request, absl::Now() + absl::Seconds(60), nullptr, &snapshot);
      if (!s.ok()) return Prefixed(s, "Pull", k);
      for (size_t i = 0; i < snapshot->params.size(); ++i) {
        const ChunkSpec& c =
            shards_[k]->store().chunk_spec(static_cast<int>(i));
        std::memcpy(params.data() + FlatOffset(layout_, c),
                    snapshot->params[i].data(), c.length * sizeof(float));
      }
      version = std::min(version, snapshot->version);
    }
    return version;
  }

  absl::Span<float> GradientBuffer() override {
    return absl::MakeSpan(gradients_);
  }

  absl::StatusOr<StepReport> Step(StepRequest request) override {
    rows_.clear();
    for (const RowGradients& rows : request.rows) StageRows(rows);
    StepReport report;
    ASSIGN_OR_RETURN(report.version,
                     Push(request.clock, request.grads, request.loss));
    if (request.push_only) return report;
    if (run_while_waiting_ && request.while_waiting) {
      request.while_waiting();
      ++calls_->while_waiting;
    }
    ASSIGN_OR_RETURN(report.version, Pull(request.clock + 1, request.params));
    return report;
  }

  absl::StatusOr<uint64_t> Push(uint64_t clock, absl::Span<const float> grads,
                                float loss) {
    uint64_t version = UINT64_MAX;
    for (int k = 0; k < static_cast<int>(shards_.size()); ++k) {
      PushView push;
      push.job_id = config_.job_id;
      push.rank = static_cast<uint32_t>(rank_);
      push.clock = clock;
      push.loss = loss;
      for (int global : plan_.ChunksOfShard(k)) {
        const ChunkSpec& c = plan_.chunks()[global];
        const float* data = grads.data() + FlatOffset(layout_, c);
        push.chunks.push_back(ChunkView{
            static_cast<uint32_t>(c.tensor_id),
            static_cast<uint32_t>(c.chunk_index), proto::DTYPE_FLOAT32,
            absl::string_view(reinterpret_cast<const char*>(data),
                              c.length * sizeof(float))});
      }
      for (const auto& [table, rows] : rows_) {
        const size_t dim = config_.model.embeddings[table].dim;
        auto& mine = rows.by_shard[k];
        if (mine.ids.empty()) continue;
        push.rows.push_back(RowView{
            table, proto::DTYPE_FLOAT32,
            absl::string_view(reinterpret_cast<const char*>(mine.ids.data()),
                              mine.ids.size() * sizeof(uint64_t)),
            absl::string_view(reinterpret_cast<const char*>(mine.values.data()),
                              mine.ids.size() * dim * sizeof(float))});
      }
      proto::PushResponse response;
      absl::Status s = shards_[k]->Push(push, &response);
      if (absl::IsAborted(s)) ++calls_->aborted;
      if (!s.ok()) return Prefixed(s, "Push", k);
      version = std::min(version, response.version());
    }
    ++calls_->pushes;
    return version;
  }

  absl::Status PullRows(uint64_t clock, uint32_t table,
                        absl::Span<const uint64_t> ids,
                        absl::Span<float> out) override {
    const size_t dim = config_.model.embeddings[table].dim;
    const auto positions =
        RowPositionsByShard(table, ids, static_cast<int>(shards_.size()));
    for (int k = 0; k < static_cast<int>(shards_.size()); ++k) {
      if (positions[k].empty()) continue;
      std::vector<uint64_t> mine;
      for (uint32_t p : positions[k]) mine.push_back(ids[p]);
      proto::PullRowsRequest request;
      request.set_job_id(config_.job_id);
      request.set_rank(rank_);
      request.set_clock(clock);
      request.set_table(table);
      request.set_ids(EncodeRowIds(mine));
      proto::PullRowsResponse response;
      absl::Status s = testing::PullRowsInto(*shards_[k], request,
                                             absl::Now() + absl::Seconds(60),
                                             nullptr, &response);
      if (!s.ok()) return Prefixed(s, "PullRows", k);
      for (size_t i = 0; i < mine.size(); ++i) {
        std::memcpy(&out[positions[k][i] * dim],
                    response.data().data() + i * dim * sizeof(float),
                    dim * sizeof(float));
      }
    }
    ++calls_->row_pulls;
    return absl::OkStatus();
  }

  // The rows of a step's push, by shard.
  void StageRows(const RowGradients& gradients) {
    const uint32_t table = gradients.table;
    const absl::Span<const uint64_t> ids = gradients.ids;
    const absl::Span<const float> grads = gradients.grads;
    const size_t dim = config_.model.embeddings[table].dim;
    StagedRows& rows = rows_[table];
    rows.by_shard.assign(shards_.size(), {});
    const auto positions =
        RowPositionsByShard(table, ids, static_cast<int>(shards_.size()));
    for (size_t k = 0; k < shards_.size(); ++k) {
      for (uint32_t p : positions[k]) {
        rows.by_shard[k].ids.push_back(ids[p]);
        rows.by_shard[k].values.insert(rows.by_shard[k].values.end(),
                                       grads.begin() + p * dim,
                                       grads.begin() + (p + 1) * dim);
      }
    }
  }

  void Heartbeat(uint64_t clock, bool finished, absl::Duration) override {
    for (Shard* shard : shards_) {
      proto::HeartbeatRequest request;
      request.set_job_id(config_.job_id);
      request.set_rank(rank_);
      request.set_clock(clock);
      request.set_finished(finished);
      proto::HeartbeatResponse response;
      (void)shard->Heartbeat(request, &response);
    }
  }

  absl::Status ReportEpoch(const EpochReport& report) override {
    RETURN_IF_ERROR(shards_[0]->ReportEpoch(
        ToReportEpochRequest(report, config_.job_id, rank_)));
    ++calls_->epoch_reports;
    return absl::OkStatus();
  }

 private:
  // A step's rows, by shard.
  struct ShardRows {
    std::vector<uint64_t> ids;
    std::vector<float> values;
  };
  struct StagedRows {
    std::vector<ShardRows> by_shard;
  };
  std::map<uint32_t, StagedRows> rows_;

  absl::StatusOr<uint64_t> RegisterPhase(bool join, uint64_t clock) {
    const proto::RegisterRequest request = MakeRegisterRequest(
        ClientSetup{&config_, &plan_, &layout_, rank_}, join, clock,
        /*incarnation=*/1000 + rank_, /*launch=*/"");
    uint64_t largest = 0;
    for (int k = 0; k < static_cast<int>(shards_.size()); ++k) {
      proto::RegisterResponse response;
      absl::Status s = shards_[k]->Register(request, &response);
      if (!s.ok()) return Prefixed(s, "Register", k);
      largest = std::max<uint64_t>(largest, response.clock());
    }
    return largest;
  }

  const JobConfig& config_;
  const PartitionPlan& plan_;
  const FlatLayout& layout_;
  const int rank_;
  std::vector<Shard*> shards_;
  InProcessCluster::Calls* calls_;
  const bool run_while_waiting_;
  std::vector<float> gradients_;
};

}  // namespace

InProcessCluster::InProcessCluster(const JobConfig& config) {
  for (int k = 0; k < config.num_shards(); ++k) {
    absl::StatusOr<std::unique_ptr<Shard>> shard = Shard::Create(config, k);
    INFO(shard.status().ToString());
    REQUIRE(shard.ok());
    shards_.push_back(*std::move(shard));
  }
}

InProcessCluster::~InProcessCluster() {
  for (auto& shard : shards_) shard->Shutdown();
}

ParameterClientFactory InProcessCluster::ClientFactory() {
  return [this](const ClientSetup& setup)
             -> absl::StatusOr<std::unique_ptr<ParameterClient>> {
    std::vector<Shard*> shards;
    for (auto& shard : shards_) shards.push_back(shard.get());
    return std::make_unique<InProcessClient>(setup, std::move(shards), &calls_,
                                             run_while_waiting_);
  };
}

}  // namespace paramd::testing
