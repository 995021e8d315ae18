// RankTable: what a shard's update policy knows of each worker rank —
// whether it is live (expected), the clock it pushes next, its last
// accepted push (the exactly-once rule) and its staleness counts. The
// policy owns one and its rule (policy_rule.h) reads it; not thread-safe:
// the policy's lock guards it.
#ifndef PARAMD_SERVER_POLICY_RANK_TABLE_H_
#define PARAMD_SERVER_POLICY_RANK_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace paramd {

struct PolicyWorker {
  bool live = true;
  uint64_t clock = 0;  // Pushes of this rank the policy has accepted.
  // Late pushes acknowledged and dropped (sync with backup workers).
  uint64_t dropped = 0;
  // Over this process's accepted pushes of the rank: their number and the
  // sum of their staleness tau (push_staleness).
  uint64_t accepted = 0;
  uint64_t staleness_sum = 0;
  uint64_t last_staleness = 0;  // Of its last accepted push; 0 before one.
};

// The policy's part of a checkpoint, with the store's state at the same
// version (server/checkpoint/checkpointer.h).
struct PolicyState {
  uint64_t version = 0;
  std::vector<uint64_t> clocks;        // By rank: the next clock it pushes.
  std::vector<int64_t> last_accepted;  // By rank; -1: none.
  std::string store_state;             // ShardStore::SaveState
  // By rank: the clock of its push in the open sync round whose rows of
  // tables with policy async are in store_state already (-1: none; empty:
  // none anywhere): its retry after a restore is taken into the round
  // without them (SyncRule).
  std::vector<int64_t> rows_applied;
  // By rank: in the live set (a replica's part, not a checkpoint's).
  std::vector<bool> live;
  // The store's table clocks at `version` (ShardStore::TableClocks).
  std::vector<int64_t> table_clocks;
  // An incremental capture: store_changes holds the store's changes
  // (ShardStore::SaveChanges) since the full capture at base_version, and
  // store_state is empty. A restore of one: store_state holds the full
  // capture's state and store_changes is applied on it.
  bool incremental = false;
  uint64_t base_version = 0;
  std::string store_changes;
  // Whether the store was saved (a table with storage writes its disk's
  // snapshot, which may fail): a capture that was not is not written.
  absl::Status saved;
  // How long the capture held the shard (its pushes waiting), for the
  // checkpoint's log line.
  absl::Duration held;
};

class RankTable {
 public:
  // Every rank starts live at clock 0, with no push accepted.
  explicit RankTable(int num_workers);

  int size() const { return static_cast<int>(workers_.size()); }
  const PolicyWorker& operator[](int rank) const { return workers_[rank]; }
  const std::vector<PolicyWorker>& workers() const { return workers_; }

  // Whether a push of (rank, clock) is the one accepted last from `rank`:
  // a retry, acknowledged and not applied again.
  bool IsLastAccepted(int rank, uint64_t clock) const;
  // `rank`'s push of `clock` was accepted with staleness tau `staleness`
  // (`dropped`: acknowledged and not applied): the rank pushes clock + 1
  // next, and this push is its last.
  void Accepted(int rank, uint64_t clock, uint64_t staleness, bool dropped);
  // `rank` is live at `clock`. Its last accepted push stays recognisable
  // when it joins past it (it retries that push after registering again,
  // say across a server restart); joining at or below it, it pushes those
  // clocks anew.
  void Join(int rank, uint64_t clock);
  // `rank` leaves the live set; false when it was not in it.
  bool Leave(int rank);
  // Sets `rank`'s clock (a rule's catch-up after a restore).
  void SetClock(int rank, uint64_t clock) { workers_[rank].clock = clock; }

  // The largest clock of any rank, live or not.
  uint64_t Largest() const;
  // The smallest clock of a live rank other than `except` (-1: none
  // excepted); UINT64_MAX when there is none.
  uint64_t SlowestLive(int except = -1) const;
  // The live ranks r with pred(r), ascending.
  template <typename Pred>
  std::vector<int> Live(Pred pred) const;
  // "1, 3"; "-" for none.
  static std::string List(const std::vector<int>& ranks);

  // The table's part of a checkpoint: clocks, last accepted pushes, and
  // who is live.
  void Save(PolicyState* state) const;
  // Clocks and last accepted pushes from a checkpoint (who is live stays
  // as it is); FailedPrecondition when it was taken with another number
  // of ranks.
  absl::Status Restore(const PolicyState& state);

 private:
  std::vector<PolicyWorker> workers_;
  // The clock of each rank's last accepted push since it joined; -1: none.
  std::vector<int64_t> last_accepted_;
};

template <typename Pred>
std::vector<int> RankTable::Live(Pred pred) const {
  std::vector<int> out;
  for (int r = 0; r < size(); ++r) {
    if (workers_[r].live && pred(r)) out.push_back(r);
  }
  return out;
}

}  // namespace paramd

#endif  // PARAMD_SERVER_POLICY_RANK_TABLE_H_
