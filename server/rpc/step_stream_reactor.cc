#include "server/rpc/step_stream_reactor.h"

#include <utility>

#include "common/rpc/credentials.h"
#include "common/rpc/grpc_status.h"
#include "common/wire/wire_format.h"

namespace paramd {

StepStreamReactor::StepStreamReactor(GrpcParameterService* service,
                                     grpc::CallbackServerContext* context)
    : service_(service) {
  const grpc::Status auth =
      CheckCallToken(*service_->security_, *context, "StepStream");
  if (!auth.ok()) {
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
    }
    Finish(auth);
    return;
  }
  StartRead(&request_);
}

void StepStreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    // The worker half-closed (or the call is over).
    End(absl::OkStatus());
    return;
  }
  bool cancelled;
  {
    absl::MutexLock lock(&mu_);
    cancelled = cancelled_;
    in_step_ = !cancelled;
  }
  if (cancelled) {
    End(absl::CancelledError("StepStream: cancelled"));
    return;
  }
  PushView view;
  proto::PushResponse pushed;
  if (absl::Status s =
          service_->ApplyPush("StepStream", request_, &view, &pushed);
      !s.ok()) {
    EndStep(s);
    return;
  }
  // The pull of the next clock, as PushPull's.
  proto::PullRequest pull;
  pull.set_job_id(view.job_id);
  pull.set_rank(view.rank);
  pull.set_clock(view.clock + 1);
  pull.set_dtype(static_cast<proto::DType>(view.pull_dtype));
  traced_rank_ = static_cast<int>(view.rank);
  traced_clock_ = view.clock + 1;
  StartPull(pull);
}

void StepStreamReactor::StartPull(const proto::PullRequest& pull) {
  const bool half = pull.dtype() == proto::DTYPE_FLOAT16;
  {
    absl::MutexLock lock(&mu_);
    pulled_ = false;
    pull_ = 0;
  }
  const uint64_t handle = service_->shard_->StartPull(
      pull, [this, half](
                absl::StatusOr<std::shared_ptr<const ParamSnapshot>> result) {
        {
          absl::MutexLock lock(&mu_);
          pulled_ = true;
          pull_ = 0;
        }
        Pulled(std::move(result), half);
      });
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    if (!pulled_) {
      pull_ = handle;
      cancel = cancelled_;  // OnCancel came before the handle was known.
    }
  }
  if (cancel) service_->shard_->CancelPull(handle);
}

void StepStreamReactor::Pulled(
    absl::StatusOr<std::shared_ptr<const ParamSnapshot>> snapshot, bool half) {
  if (!snapshot.ok()) {
    EndStep(snapshot.status());
    return;
  }
  reply_begin_ = service_->shard_->trace().WantsPull(traced_clock_)
                     ? absl::Now()
                     : absl::InfinitePast();
  reply_ = service_->PullFrame(*snapshot, 0, (*snapshot)->params.size(), half);
  bool cancelled;
  {
    absl::MutexLock lock(&mu_);
    in_step_ = false;
    cancelled = cancelled_;
  }
  if (cancelled) {
    End(absl::CancelledError("StepStream: cancelled"));
    return;
  }
  StartWrite(&reply_);
}

void StepStreamReactor::EndStep(const absl::Status& s) {
  {
    absl::MutexLock lock(&mu_);
    in_step_ = false;
  }
  End(s);
}

void StepStreamReactor::OnWriteDone(bool ok) {
  if (!ok) {
    End(absl::CancelledError("StepStream: the worker went away"));
    return;
  }
  if (reply_begin_ != absl::InfinitePast()) {
    service_->shard_->trace().Reply(traced_rank_, traced_clock_, reply_begin_,
                                    absl::Now(), reply_.Length());
  }
  StartRead(&request_);
}

void StepStreamReactor::OnCancel() {
  uint64_t handle = 0;
  bool end_now = false;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (in_step_) {
      handle = pull_;  // 0: not in the shard yet, or ended; the step ends.
    } else {
      end_now = true;
    }
  }
  // Its `done` ends the step and the call (or is running and will).
  if (handle != 0) service_->shard_->CancelPull(handle);
  if (end_now) End(absl::CancelledError("StepStream: cancelled"));
}

void StepStreamReactor::End(const absl::Status& s) {
  {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    finished_ = true;
  }
  Finish(ToGrpcStatus(s));
}

}  // namespace paramd
