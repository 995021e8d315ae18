// TransportFaults: what the job file's testing section does to one shard's
// traffic — its link shaped to testing.link_mbps (LinkShaper) and its
// replies delayed and dropped (ReplyFaults). The server builds it from the
// settings; the gRPC handlers call it at fixed points and read no testing
// setting themselves. With nothing set every call returns at once.
// Thread-safe.
#ifndef PARAMD_SERVER_FAULTS_TRANSPORT_FAULTS_H_
#define PARAMD_SERVER_FAULTS_TRANSPORT_FAULTS_H_

#include "common/base/clock.h"
#include "common/config/job_config.h"
#include "server/faults/link_shaper.h"
#include "server/faults/reply_faults.h"

namespace paramd {

struct TransportFaults {
  // `clock` must outlive this object.
  explicit TransportFaults(const TestingConfig& testing,
                           Clock* clock = RealClock())
      : link(testing.link_mbps, clock), replies(testing, clock) {}

  LinkShaper link;
  ReplyFaults replies;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_FAULTS_TRANSPORT_FAULTS_H_
