// Error plumbing for absl::Status and absl::StatusOr.
//
//   RETURN_IF_ERROR(store.Save(path));
//   ASSIGN_OR_RETURN(PartitionPlan plan, PartitionPlan::Build(...));
//
// Each returns the failed status from the enclosing function unchanged.
#ifndef PARAMD_COMMON_BASE_STATUS_MACROS_H_
#define PARAMD_COMMON_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PARAMD_STATUS_CONCAT_INNER_(a, b) a##b
#define PARAMD_STATUS_CONCAT_(a, b) PARAMD_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status) once; returns it when not OK.
#define RETURN_IF_ERROR(expr)                                         \
  do {                                                                \
    if (::absl::Status paramd_status_ = (expr); !paramd_status_.ok()) \
      return paramd_status_;                                          \
  } while (false)

// Evaluates `rexpr` (an absl::StatusOr<T>) once; returns its status when not
// OK, else moves its value into `lhs`, which may declare a variable.
#define ASSIGN_OR_RETURN(lhs, rexpr)                                        \
  ASSIGN_OR_RETURN_IMPL_(PARAMD_STATUS_CONCAT_(paramd_statusor_, __LINE__), \
                         lhs, rexpr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                           \
  if (!statusor.ok()) return statusor.status();      \
  lhs = *std::move(statusor)

#endif  // PARAMD_COMMON_BASE_STATUS_MACROS_H_
