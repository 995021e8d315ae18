// Reading a merged step timeline (TraceEvents::Merge) back in tests: the
// document must parse as JSON with a traceEvents list whose every entry is
// a complete event ("X") or metadata ("M"); each complete event has its
// lane, times and args.clock (and a server's, args.rank).
#ifndef PARAMD_TESTS_TRACE_READER_H_
#define PARAMD_TESTS_TRACE_READER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace paramd::testing {

struct TraceEvent {
  std::string name;
  int pid = 0, tid = 0;
  double ts = 0, dur = 0;
  int64_t clock = -1;
  int rank = -1;  // args.rank (a server's events), -1 without.
  double end() const { return ts + dur; }
  bool Inside(const TraceEvent& outer) const {
    return ts >= outer.ts && end() <= outer.end();
  }
};

struct TraceDocument {
  std::vector<TraceEvent> events;        // The complete events.
  std::map<int, std::string> processes;  // pid -> process_name.
};

// InvalidArgument naming what does not hold.
absl::StatusOr<TraceDocument> ReadTrace(const std::string& json);

}  // namespace paramd::testing

#endif  // PARAMD_TESTS_TRACE_READER_H_
