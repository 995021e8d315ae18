#include "server/optimizer/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace paramd {

double LearningRateSchedule::At(int64_t step) const {
  const int64_t warmup = config_.warmup_steps;
  if (warmup > 0 && step <= warmup) {
    return base_ * static_cast<double>(step) / static_cast<double>(warmup);
  }
  // Steps since the warm-up ended, from 0.
  const int64_t t = step - std::max<int64_t>(warmup, 0) - 1;
  switch (config_.type) {
    case ScheduleType::kConstant:
      return base_;
    case ScheduleType::kStep:
      return base_ * std::pow(config_.gamma,
                              static_cast<double>(t / config_.step_size));
    case ScheduleType::kCosine: {
      // From base_ at the first step after warm-up to min_lr at step
      // total_steps, then min_lr.
      const double span = static_cast<double>(config_.total_steps -
                                              std::max<int64_t>(warmup, 0) - 1);
      if (span <= 0) return base_;
      const double progress = std::min(static_cast<double>(t), span) / span;
      return config_.min_lr +
             (base_ - config_.min_lr) * 0.5 * (1.0 + std::cos(M_PI * progress));
    }
  }
  return base_;
}

}  // namespace paramd
