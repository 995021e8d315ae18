// The other replica of a shard: the calls to it (ReplicaPeer) and where
// this replica reaches it (PeerSlot), which a call from it may say.
#ifndef PARAMD_SERVER_REPLICATION_REPLICA_PEER_H_
#define PARAMD_SERVER_REPLICATION_REPLICA_PEER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/paramd.pb.h"

namespace paramd {

// The other replica of a shard, as the calls reach it (gRPC in
// server/replication/rpc/replica_rpc.h). Each call returns by its
// `timeout` whatever the peer's host does; the request is shared because a
// call the caller stopped waiting for may still hold it. Thread-safe.
class ReplicaPeer {
 public:
  virtual ~ReplicaPeer() = default;
  virtual absl::Status Replicate(
      std::shared_ptr<const proto::ReplicateRequest> request,
      absl::Duration timeout, proto::ReplicateResponse* response) = 0;
  virtual absl::Status Handover(const proto::HandoverRequest& request,
                                absl::Duration timeout,
                                proto::HandoverResponse* response) = 0;
};

// Where shard `shard`'s replica reaches its peer, and the peer's calls
// there. Thread-safe; its lock is a leaf.
class PeerSlot {
 public:
  // How to reach a peer at an address.
  using Connect =
      std::function<std::unique_ptr<ReplicaPeer>(const std::string& address)>;

  explicit PeerSlot(int shard) : shard_(shard) {}

  // Before serving: how to connect, and the peer's address when known
  // (empty: a call from it will say, Learn).
  void Set(Connect connect, std::string address) ABSL_LOCKS_EXCLUDED(mu_);
  // The peer as this replica reaches it now; null while not known.
  std::shared_ptr<ReplicaPeer> Get() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string Address() const ABSL_LOCKS_EXCLUDED(mu_);
  // A call from the peer at `sender`: taken only when no address is set
  // (--peer, the job file's stands: the sender's idea of its address may
  // not be how this replica reaches it).
  void Learn(const std::string& sender) ABSL_LOCKS_EXCLUDED(mu_);
  // A peer starting says where it listens now: replaces the address and
  // connects to it afresh, also when it is the same (a wildcard or port 0
  // is not an address: Learn then). Whether it was taken: the peer started
  // anew and holds nothing of this replica's.
  bool Adopt(const std::string& sender) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int shard_;
  Connect connect_;  // Set before serving.
  mutable absl::Mutex mu_;
  std::shared_ptr<ReplicaPeer> peer_ ABSL_GUARDED_BY(mu_);
  std::string address_ ABSL_GUARDED_BY(mu_);
};

}  // namespace paramd

#endif  // PARAMD_SERVER_REPLICATION_REPLICA_PEER_H_
