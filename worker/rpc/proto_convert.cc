#include "worker/rpc/proto_convert.h"

namespace paramd {

proto::RegisterRequest MakeRegisterRequest(const ClientSetup& setup, bool join,
                                           uint64_t clock, uint64_t incarnation,
                                           const std::string& launch) {
  proto::RegisterRequest r;
  r.set_job_id(setup.config->job_id);
  r.set_rank(static_cast<uint32_t>(setup.rank));
  r.set_plan_fingerprint(setup.plan->fingerprint());
  r.set_join(join);
  r.set_clock(clock);
  r.set_incarnation(incarnation);
  r.set_launch(launch);
  return r;
}

proto::ReportEpochRequest ToReportEpochRequest(const EpochReport& report,
                                               const std::string& job_id,
                                               int rank) {
  proto::ReportEpochRequest r;
  r.set_job_id(job_id);
  r.set_rank(static_cast<uint32_t>(rank));
  r.set_epoch(static_cast<uint32_t>(report.epoch));
  r.set_train_loss_sum(report.train_loss_sum);
  r.set_train_samples(report.train_samples);
  r.set_train_seconds(report.train_seconds);
  r.set_test_correct(report.test_correct);
  r.set_test_total(report.test_total);
  r.set_test_loss_sum(report.test_loss_sum);
  r.mutable_test_positives_by_score()->Add(
      report.test_scores.positives().begin(),
      report.test_scores.positives().end());
  r.mutable_test_negatives_by_score()->Add(
      report.test_scores.negatives().begin(),
      report.test_scores.negatives().end());
  return r;
}

}  // namespace paramd
