// A learning-rate schedule (the optimizer's and each embedding table's
// `schedule` section; docs/job-file.md). A plain struct.
#ifndef PARAMD_COMMON_CONFIG_SCHEDULE_CONFIG_H_
#define PARAMD_COMMON_CONFIG_SCHEDULE_CONFIG_H_

#include <cstdint>

namespace paramd {

enum class ScheduleType { kConstant, kStep, kCosine };

struct ScheduleConfig {
  ScheduleType type = ScheduleType::kConstant;
  int64_t warmup_steps = 0;  // Linear warm-up from 0 over these steps.
  int64_t step_size = 1;     // step: multiply by gamma every step_size steps.
  double gamma = 0.1;
  int64_t total_steps = 0;  // cosine: steps (warm-up included) to min_lr.
  double min_lr = 0;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_SCHEDULE_CONFIG_H_
