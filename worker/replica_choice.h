// ReplicaChoice: which replica of each shard a worker calls
// (replication.factor 2: a primary and a backup per shard), and when a
// shard's current replica is taken for hung. Plain C++ on the Clock seam:
// the gRPC client (worker/rpc/shard_links.h) tells it how each call ended
// and asks it where to call; tests drive it with a FakeClock.
//
// - A call that ended UNAVAILABLE or DEADLINE_EXCEEDED (no server
//   answered) marks its shard; FailOver then moves every marked shard with
//   a backup to its other replica. A cancelled call says nothing of its
//   server (the worker cancels the other shards' calls of a failed step).
// - A shard's current replica is heard from when a call or heartbeat to it
//   ends otherwise (any answer, an error included); one silent for longer
//   than hung_after, counted from when it became the current one at most,
//   is Hung — a stopped or frozen server whose calls would wait out their
//   deadline while its backup could serve.
// - A shard moved off a replica taken for hung (NoteHung) does not move
//   back to it for hung_after: that replica may be the one that was
//   replaced, and its other replica refuses until it takes over.
//
// Thread-safe: Note, Heard, Silence, Hung and current from any thread
// (calls end on gRPC's threads); FailOver and NoteHung from the thread
// that starts the calls, with none in flight.
#ifndef PARAMD_WORKER_REPLICA_CHOICE_H_
#define PARAMD_WORKER_REPLICA_CHOICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/base/clock.h"

namespace paramd {

class ReplicaChoice {
 public:
  // `replicas[s]`: how many replicas shard s has (1, or 2 with a backup).
  // Every shard starts at its primary, heard from now. `clock` outlives
  // this.
  ReplicaChoice(const std::vector<int>& replicas, absl::Duration hung_after,
                Clock* clock);

  int shards() const { return static_cast<int>(shards_.size()); }
  absl::Duration hung_after() const { return hung_after_; }
  // The replica called now: 0 (the primary) or 1 (the backup).
  int current(int shard) const {
    return shards_[shard]->current.load(std::memory_order_acquire);
  }

  // How a call to `shard` ended.
  void Note(int shard, const absl::Status& status);
  // Note for a step whose shard was Hung: FailOver moves it and does not
  // move it back for hung_after.
  void NoteHung(int shard, const absl::Status& status);
  // A call or heartbeat to the shard ended with `ended`: unless it says
  // no server answered (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED,
  // UNKNOWN), its current replica was heard from now.
  void Heard(int shard, const absl::Status& ended);
  // How long the shard's current replica has answered nothing.
  absl::Duration Silence(int shard) const;
  // Whether the shard has a backup and its current replica answered
  // nothing for longer than hung_after.
  bool Hung(int shard) const;

  // After a failed call: every shard with a backup whose last call found
  // no server is called at its other replica from now on (unless it would
  // go back to a replica taken for hung within hung_after). Returns the
  // shards moved; each is heard from now.
  std::vector<int> FailOver();

 private:
  struct Shard {
    int replicas = 1;
    std::atomic<int> current{0};
    // The code of the last call's end (absl::StatusCode).
    std::atomic<int> last_code{0};
    // When the current replica last answered (absl::ToUnixNanos).
    std::atomic<int64_t> heard{0};
    // NoteHung since the last FailOver; the replica taken for hung, not
    // called again before avoid_until (-1: none).
    bool hung = false;
    int avoided = -1;
    absl::Time avoid_until = absl::InfinitePast();
  };

  void HeardNow(Shard* shard) const;

  const absl::Duration hung_after_;
  Clock* const clock_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace paramd

#endif  // PARAMD_WORKER_REPLICA_CHOICE_H_
