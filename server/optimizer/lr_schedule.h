// LearningRateSchedule: the learning rate at each optimizer step (counted
// from 1): optional linear warm-up (step s of w: lr·s/w), then constant,
// step decay (× gamma every step_size steps) or cosine annealing from lr at
// the first step after warm-up to min_lr at step total_steps (and min_lr
// after). Immutable; thread-safe.
#ifndef PARAMD_SERVER_OPTIMIZER_LR_SCHEDULE_H_
#define PARAMD_SERVER_OPTIMIZER_LR_SCHEDULE_H_

#include <cstdint>

#include "common/config/job_config.h"

namespace paramd {

class LearningRateSchedule {
 public:
  static LearningRateSchedule Constant(double lr) {
    return LearningRateSchedule(lr, ScheduleConfig{});
  }
  LearningRateSchedule(double base_lr, const ScheduleConfig& config)
      : base_(base_lr), config_(config) {}

  double At(int64_t step) const;

 private:
  double base_;
  ScheduleConfig config_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_OPTIMIZER_LR_SCHEDULE_H_
