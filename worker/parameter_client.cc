#include "worker/parameter_client.h"

#include <optional>
#include <utility>

#include "common/base/status_macros.h"

namespace paramd {
namespace {

// StartPushPull's default: one Step when first needed.
class DeferredExchange final : public StepExchange {
 public:
  DeferredExchange(ParameterClient* client, uint64_t clock,
                   absl::Span<const float> grads, float loss,
                   absl::Span<float> params)
      : client_(client),
        clock_(clock),
        grads_(grads),
        loss_(loss),
        params_(params) {}

  void GradientReady(int64_t, int64_t) override {}
  absl::Status AwaitParams(int64_t, int64_t) override {
    return Finish().status();
  }
  absl::StatusOr<uint64_t> Finish() override {
    if (!result_.has_value()) {
      result_ = StepVersion(*client_, {clock_, grads_, loss_, params_});
    }
    return *result_;
  }

 private:
  ParameterClient* const client_;
  const uint64_t clock_;
  const absl::Span<const float> grads_;
  const float loss_;
  const absl::Span<float> params_;
  std::optional<absl::StatusOr<uint64_t>> result_;
};

}  // namespace

absl::StatusOr<uint64_t> StepVersion(ParameterClient& client,
                                     StepRequest request) {
  ASSIGN_OR_RETURN(StepReport report, client.Step(std::move(request)));
  return report.version;
}

std::unique_ptr<StepExchange> ParameterClient::StartPushPull(
    uint64_t clock, absl::Span<const float> grads, float loss,
    absl::Span<float> params) {
  return std::make_unique<DeferredExchange>(this, clock, grads, loss, params);
}

absl::Status ParameterClient::DeclareModel(const std::string&) {
  return absl::UnimplementedError(
      "DeclareModel: this client cannot declare a model");
}

absl::Status ParameterClient::Initialize(absl::Span<const float>) {
  return absl::UnimplementedError(
      "Initialize: this client cannot send initial values");
}

absl::StatusOr<uint64_t> RegisterInTwoPhases(
    const std::function<absl::StatusOr<uint64_t>(bool join, uint64_t clock)>&
        phase) {
  // Each shard may move on between the phases; a few tries settle, and
  // once kExactTries were overtaken (rounds outpace a register's round
  // trips: a busy machine, a fast job) the join names a clock kJoinLead
  // ahead of the proposal, which the shards accept and whose rounds do not
  // wait for the rank before it.
  constexpr int kAttempts = 20;
  constexpr int kExactTries = 3;
  constexpr uint64_t kJoinLead = 2;
  absl::Status last;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    ASSIGN_OR_RETURN(uint64_t proposed, phase(false, 0));
    const uint64_t lead = attempt < kExactTries ? 0 : kJoinLead;
    absl::StatusOr<uint64_t> joined = phase(true, proposed + lead);
    if (joined.ok() || !absl::IsAborted(joined.status())) return joined;
    last = joined.status();
  }
  return last;
}

}  // namespace paramd
