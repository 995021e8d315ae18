// Requests for shard tests: registration at clock 0, a valid push (every
// chunk a shard owns, every element one value), a pull at a clock, and a
// pull's reply as the protobuf message a unary call answers.
#ifndef PARAMD_TESTS_WHOLE_PUSH_H_
#define PARAMD_TESTS_WHOLE_PUSH_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/base/cancellation.h"
#include "proto/paramd.pb.h"
#include "server/shard/shard.h"

namespace paramd::testing {

// Registers `rank` with `shard` at clock 0 (both phases), failing the test
// on error.
void RegisterAtZero(Shard& shard, const std::string& job_id, uint32_t rank);

// A push from `rank` at `clock` to `shard`: every chunk it owns, every
// element `value`.
proto::PushRequest WholePush(const Shard& shard, const std::string& job_id,
                             uint32_t rank, uint64_t clock, float value);

// The store's version and every chunk's values, as bytes (equal states
// compare equal, bit for bit).
std::string DenseState(const Shard& shard);

// A pull of every chunk by `rank` at `clock`.
proto::PullRequest PullAt(const std::string& job_id, uint32_t rank,
                          uint64_t clock);

// Shard::Pull, or Shard::PullRows, with the reply copied into its
// protobuf message (what a unary Pull or PullRows answers).
absl::Status PullInto(Shard& shard, const proto::PullRequest& request,
                      absl::Time deadline, Cancellation* cancel,
                      proto::PullResponse* response);
absl::Status PullRowsInto(Shard& shard, const proto::PullRowsRequest& request,
                          absl::Time deadline, Cancellation* cancel,
                          proto::PullRowsResponse* response);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_WHOLE_PUSH_H_
