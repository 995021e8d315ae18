// EtcdClient: the calls of etcd's v3 API that coordinating a job takes —
// keys read, written and deleted, a key created only where there is none
// (and replaced only at the revision its writer read: a fenced takeover),
// leases granted, kept alive and revoked, and a key range watched — over
// gRPC to one or more members of an etcd cluster.
//
// Every call has a deadline (Options::timeout) and names, when it fails,
// the call, its key and the member it last tried; a call a member could
// not serve (UNAVAILABLE: down, unreachable, or without a leader; or no
// answer within the deadline) is tried on the next member, each member
// once. Reads are linearizable (etcd's default): a member cut off from its
// cluster's majority answers none.
// A write tried again on another member may have been applied by the
// first (its answer lost with the member): a Create or ReplaceAt then
// finds its own write as the holder, which the caller can tell by the
// value or the lease it wrote.
//
// With Options::user, every call is made as that user of etcd's
// authentication: the client asks etcd for a token (Auth.Authenticate)
// before its first call, sends it with each, and asks for a new one once
// when etcd says a token is no longer valid (it expired, or etcd
// restarted).
//
// Thread-safe: calls may be made from any thread at once.
#ifndef PARAMD_COMMON_COORD_RPC_ETCD_CLIENT_H_
#define PARAMD_COMMON_COORD_RPC_ETCD_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace etcdserverpb {
class KV;
class Lease;
class Watch;
}  // namespace etcdserverpb

namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace paramd {

// A key as etcd holds it.
struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  // The revision that created it.
  int64_t mod_revision = 0;     // The revision that last wrote it.
  int64_t version = 0;          // Writes since it was created.
  int64_t lease = 0;            // Its lease; 0 when none.
};

// What a conditional write found: whether it wrote, the store's revision
// after the call, and the key as it is when it did not write (absent when
// the key does not exist).
struct EtcdClaim {
  bool written = false;
  int64_t revision = 0;
  std::optional<EtcdKeyValue> holder;
};

// Keys under a prefix, at one revision of the store.
struct EtcdRange {
  std::vector<EtcdKeyValue> kvs;
  int64_t revision = 0;
};

// One condition of a transaction (EtcdClient::Txn) on a key.
struct EtcdCondition {
  // The key does not exist.
  static EtcdCondition Absent(std::string key);
  // The key exists, created at `create_revision` (its writer's claim).
  static EtcdCondition CreatedAt(std::string key, int64_t create_revision);
  // The key's last write is `mod_revision`.
  static EtcdCondition ModifiedAt(std::string key, int64_t mod_revision);
  // The key's value is `value` (false when the key does not exist).
  static EtcdCondition ValueIs(std::string key, std::string value);

  enum class On { kCreateRevision, kModRevision, kValue };
  std::string key;
  On on = On::kCreateRevision;
  int64_t revision = 0;
  std::string value;
};

// A write of a transaction: the key, its value, its lease (0: none).
struct EtcdWrite {
  std::string key;
  std::string value;
  int64_t lease = 0;
};

// What a transaction found: whether its conditions held (and it wrote),
// the store's revision after it, and when they did not, each condition's
// key as it is (nullopt where there is none), in the conditions' order.
struct EtcdTxnResult {
  bool written = false;
  int64_t revision = 0;
  std::vector<std::optional<EtcdKeyValue>> found;
};

// A change to a watched key.
struct EtcdEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  EtcdKeyValue kv;  // A delete's carries the key and mod_revision only.
};

class EtcdClient;

// A watch on the keys under a prefix, from a revision on: its events in
// the store's order. Made by EtcdClient::Watch; cancelled when destroyed.
class EtcdWatch {
 public:
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // The events that came since the last call, waiting for one until
  // `deadline` (none by then: an empty vector). An error once the watch
  // ended (its member went away, or etcd cancelled it — a revision already
  // compacted, say); events that came before are returned first.
  absl::StatusOr<std::vector<EtcdEvent>> Next(absl::Time deadline);

 private:
  friend class EtcdClient;
  struct Stream;
  explicit EtcdWatch(std::unique_ptr<Stream> stream);
  void Read();  // The reader thread's loop.

  std::unique_ptr<Stream> stream_;
};

class EtcdClient {
 public:
  struct Options {
    // Each call's deadline.
    absl::Duration timeout = absl::Seconds(5);
    // TLS (grpc::SslCredentials); null: plain text.
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    // With TLS, the name expected in the members' certificates instead of
    // each endpoint's host (a unix socket's: "localhost").
    std::string server_name;
    // etcd's authentication: the user and its password (empty user: none).
    std::string user;
    std::string password;
  };

  // A client of the members at `endpoints` ("HOST:PORT", or
  // "unix:PATH"); no call is made until the first request. INVALID_ARGUMENT
  // when the list is empty or an endpoint is.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(
      const std::vector<std::string>& endpoints, Options options);
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(
      const std::vector<std::string>& endpoints) {
    return Connect(endpoints, Options());
  }
  ~EtcdClient();

  // The key, or nullopt when there is none.
  absl::StatusOr<std::optional<EtcdKeyValue>> Get(const std::string& key);
  // Every key that starts with `prefix`, in key order.
  absl::StatusOr<EtcdRange> List(const std::string& prefix);
  // Writes the key (attached to `lease` when not 0); the revision written.
  absl::StatusOr<int64_t> Put(const std::string& key, const std::string& value,
                              int64_t lease = 0);
  // Deletes the key; whether there was one.
  absl::StatusOr<bool> Delete(const std::string& key);
  // Writes the key only if it does not exist (one transaction).
  absl::StatusOr<EtcdClaim> Create(const std::string& key,
                                   const std::string& value, int64_t lease);
  // Writes the key only if its last write is `mod_revision` (0: only if
  // it does not exist), as one transaction: of two writers that read the
  // same revision, one writes.
  absl::StatusOr<EtcdClaim> ReplaceAt(const std::string& key,
                                      int64_t mod_revision,
                                      const std::string& value, int64_t lease);

  // Writes `writes` if every one of `conditions` holds, as one
  // transaction; else reads each condition's key.
  absl::StatusOr<EtcdTxnResult> Txn(
      const std::vector<EtcdCondition>& conditions,
      const std::vector<EtcdWrite>& writes);

  // A lease of `ttl` (etcd may grant a longer one: its minimum); its id.
  absl::StatusOr<int64_t> Grant(absl::Duration ttl, absl::Duration* granted);
  // Renews the lease; the time it has left from now, as etcd answers it
  // (NOT_FOUND when it expired or was revoked).
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease);
  // Ends the lease now, deleting its keys.
  absl::Status Revoke(int64_t lease);

  // Watches the keys under `prefix` from `start_revision` on (0: from the
  // next change); returns once etcd made the watch.
  absl::StatusOr<std::unique_ptr<EtcdWatch>> Watch(const std::string& prefix,
                                                   int64_t start_revision);

  const std::vector<std::string>& endpoints() const { return endpoints_; }

 private:
  struct Member;
  EtcdClient(std::vector<std::string> endpoints, Options options);

  // Calls `call` on each member in turn from the last one that answered,
  // until one does not fail UNAVAILABLE; the error names `what`.
  template <typename Call>
  absl::Status OnMembers(const std::string& what, const Call& call);
  // With options_.user, the token calls carry ("": none yet); asks member
  // `m` for a new one when `fresh` or none is held.
  absl::StatusOr<std::string> Token(Member& m, bool fresh)
      ABSL_LOCKS_EXCLUDED(token_mu_);
  absl::StatusOr<EtcdClaim> WriteIf(const std::string& key, bool exists,
                                    int64_t mod_revision,
                                    const std::string& value, int64_t lease);

  const std::vector<std::string> endpoints_;
  const Options options_;
  std::vector<std::unique_ptr<Member>> members_;
  std::atomic<size_t> current_{0};  // The member that last answered.
  absl::Mutex token_mu_;
  std::string token_ ABSL_GUARDED_BY(token_mu_);
};

}  // namespace paramd

#endif  // PARAMD_COMMON_COORD_RPC_ETCD_CLIENT_H_
