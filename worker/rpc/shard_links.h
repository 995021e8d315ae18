// ShardLinks: a worker's gRPC connections to the shards, one channel each
// (even when two shards share an address), and the calls on them that
// carry tensors.
//
// Tensor bytes stay out of protobuf messages (common/wire/wire_format.h). A
// shard whose chunks fill several messages (kStreamMessageBytes) is pushed
// and pulled through PushStream and PullStream (proto/paramd.proto), so
// each end works on one message while the next is on the wire; a smaller
// one through unary Push and Pull, which cost less per call. A PushPull is
// a step of the shard's StepStream, kept open across steps (no per-step
// call setup), or a unary call.
//
// Thread-compatible: one thread starts calls at a time. The StepStreams'
// steps end on that thread, from PollSteps (the shards' StepQueue); the
// other calls too, from the StepQueue of the wait that started them
// (QueuedStreamsForAllShards). stub, generic and address may be called from
// another thread too (the heartbeats'): a shard's connection replaced when
// its server moved (FailOver) is kept open, unused, for the links' life.
//
// cluster.servers {etcd: N}: after a call found no server, FailOver asks
// where the servers are registered now (Options::find_servers); a shard
// whose server registered elsewhere (restarted on another host or port) is
// called there from then on.
#ifndef PARAMD_WORKER_RPC_SHARD_LINKS_H_
#define PARAMD_WORKER_RPC_SHARD_LINKS_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/clock.h"
#include "common/rpc/credentials.h"
#include "common/wire/shared_segment.h"
#include "proto/paramd.grpc.pb.h"
#include "worker/parameter_client.h"
#include "worker/replica_choice.h"
#include "worker/rpc/pull_sink.h"
#include "worker/rpc/queued_stream.h"
#include "worker/rpc/step_queue.h"
#include "worker/rpc/step_stream.h"

namespace paramd {

class ShardLinks {
 public:
  struct Options {
    absl::Duration push_timeout = absl::Minutes(1);
    absl::Duration pull_timeout = absl::Minutes(10);
    // replication.factor 2: each shard's backup, in shard order (empty:
    // none). A shard whose last call found no server (UNAVAILABLE,
    // DEADLINE_EXCEEDED) is called at its other replica after FailOver.
    std::vector<std::string> backups;
    // With backups: a shard whose server answered nothing (no call, no
    // heartbeat) for longer than this while a step waits on it is taken
    // for hung (stopped, frozen) and the step ended, so that FailOver tries
    // its other replica (StepDriver); the job's liveness.lease_seconds.
    absl::Duration hung_after = absl::InfiniteDuration();
    // What hung_after and the fail-over's wait are read on.
    Clock* clock = RealClock();
    // worker.shared_memory: each StepStream with a shared-memory segment
    // (common/wire/shared_segment.h) for its chunk bytes, until the
    // shard's server refuses one (RefuseSegment).
    bool shared_memory = false;
    // cluster.servers {etcd: N}: where each shard's server is registered
    // now, in shard order (unset: the addresses never change).
    std::function<absl::StatusOr<std::vector<std::string>>()> find_servers;
  };
  // Full method names, as gRPC calls them.
  struct Methods {
    std::string push, pull, push_stream, pull_stream, pull_rows, step_stream;
  };

  // `addresses`: one "host:port" per shard, in shard order; channels use
  // `security`'s TLS and token. `setup`'s config, plan and layout outlive
  // this.
  ShardLinks(const ClientSetup& setup,
             const std::vector<std::string>& addresses,
             const JobSecurity& security, Options options);

  int size() const { return static_cast<int>(shards_.size()); }
  const Options& options() const { return options_; }
  const Methods& methods() const { return methods_; }
  proto::ParameterService::Stub* stub(int shard) {
    return Current(shard).stub.get();
  }
  grpc::GenericStub* generic(int shard) { return Current(shard).generic.get(); }
  // Which replica each shard is called at, and how each call ended
  // (ReplicaChoice: Note, NoteHung, Heard, Hung, Silence). Thread-safe
  // as it says.
  ReplicaChoice& replicas() { return choice_; }
  const ReplicaChoice& replicas() const { return choice_; }
  // `done` wrapped to Note how the call ended.
  std::function<void(absl::Status)> Noting(
      int shard, std::function<void(absl::Status)> done);
  // The address of the shard's replica called now.
  std::string address(int shard) const { return Current(shard).address; }
  // After a failed call: ReplicaChoice::FailOver, and each shard moved
  // gets a new StepStream (its old one was to the other replica); with
  // options.find_servers, each shard whose server registered at another
  // address is called there (a new channel and StepStream). Returns whether
  // a shard was moved. Called by the thread that starts the calls, none in
  // flight.
  bool FailOver() ABSL_LOCKS_EXCLUDED(conns_mu_);
  // Whether the shard's pulls use PullStream: its chunks fill several
  // messages (float32, or halves under compression.pull: fp16).
  bool pull_streams(int shard) const { return shards_[shard].pull_streams; }

  // This rank's PullRequest of `clock`; `message_bytes` as in
  // PullRequest.stream_message_bytes (0: the server's default).
  proto::PullRequest MakePullRequest(uint64_t clock,
                                     uint32_t message_bytes) const;

  // Starts one shard's pull of `clock` into `sink`, or its push of
  // `messages` (a PushResponse lands in `response`): a stream when there are
  // several messages, else a unary call, on `queue`
  // (QueuedStreamsForAllShards'). `context` gets the call's deadline and
  // outlives the call; `done` runs once, from the queue's Poll.
  std::unique_ptr<QueuedStream> StartPull(
      int shard, uint64_t clock, grpc::ClientContext* context, PullSink* sink,
      StepQueue* queue, std::function<void(absl::Status)> done);
  std::unique_ptr<QueuedStream> StartPush(
      int shard, std::vector<grpc::ByteBuffer> messages,
      grpc::ClientContext* context, grpc::ByteBuffer* response,
      StepQueue* queue, std::function<void(absl::Status)> done);
  // Starts one shard's PushPull as a step of its StepStream
  // (OpenStepStreams first): the push in `messages` (the first's
  // header carries pull_dtype), as many as it takes, and the pull of
  // clock + 1 back into `sink` likewise; `written`, unless null, receives
  // when the push was written (StepStream::Step). A worker's steps have
  // no unary form: a unary PushPull took 2.3x a StepStream step's latency
  // for 4 KB (docs/architecture.md, "One call per step").
  void StartPushPull(int shard, std::vector<grpc::ByteBuffer> messages,
                     PullSink* sink, std::function<void(absl::Status)> done,
                     absl::Time* written = nullptr);
  // Writes `message`, a later piece of the push of the shard's step in
  // flight (StepStream::Append): a push sent as the backward pass makes it
  // (worker.overlap), whose first piece StartPushPull sent.
  void ContinuePush(int shard, grpc::ByteBuffer message) {
    shards_[shard].steps->Append(std::move(message));
  }
  // Readies every shard's StepStream for a step: a stream that ended
  // since the last step is heard of first (the events ready now run), and
  // each shard without an open one gets a new one, with a new segment
  // under options.shared_memory. Every stream a step takes is then open
  // before any shard's part can fail and cancel the others.
  void OpenStepStreams();
  // The shared-memory segment of the shard's StepStream: where its pushes'
  // chunk bytes go and its replies' come (null: by the socket).
  SharedSegment* segment(int shard) const {
    return shards_[shard].segment.get();
  }
  // The shard's server could not map its segment (another host): from now
  // on its steps go by the socket. Thread-safe (a step's callback).
  void RefuseSegment(int shard);
  // Whether a server refused a segment since the last call (its step then
  // failed before anything was applied, and is to be sent again).
  bool TakeSegmentRefusals() { return refused_.exchange(false); }
  // Ends the step in flight on the shard's StepStream, if there is one.
  void CancelStep(int shard);
  // Runs the StepStreams' next event (a step's `done` among them), waiting
  // for it until `until`; whether one came. The thread that waits on a
  // step polls: nothing else does.
  bool PollSteps(absl::Time until) { return queue_.Poll(until); }
  // Runs the StepStreams' events that are ready now (a call that ended
  // between steps is then known to be over).
  void DrainSteps() { queue_.Drain(); }

 private:
  // Opens the shard's StepStream unless one is open (a stream that ended
  // is replaced, with a new segment under options.shared_memory).
  void OpenStepStream(int shard);

  // One replica's channel; both stay open for the links' life (a
  // heartbeat may be on the other). Never changed once made.
  struct Conn {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<proto::ParameterService::Stub> stub;
    std::unique_ptr<grpc::GenericStub> generic;
  };
  struct Link {
    // The primary's, then the backup's (conns_mu_: replaced by
    // FollowServers).
    std::vector<std::unique_ptr<const Conn>> replicas;
    bool pull_streams = false;
    // Opened by the first PushPull that needs it and again after it ended;
    // its segment (options.shared_memory), freed after it.
    std::unique_ptr<SharedSegment> segment;
    std::unique_ptr<StepStream> steps;
    // The shard's server refused a segment: none from now on.
    std::unique_ptr<std::atomic<bool>> no_segments;
  };

  // The connection to `address` of shard `shard`.
  std::unique_ptr<const Conn> Connect(int shard,
                                      const std::string& address) const;
  const Conn& Current(int shard) const ABSL_LOCKS_EXCLUDED(conns_mu_);
  // options.find_servers: moves each shard whose server registered at
  // another address there; whether one moved.
  bool FollowServers() ABSL_LOCKS_EXCLUDED(conns_mu_);

  const std::string job_id_;
  const int rank_;
  const bool pull_half_;  // compression.pull: fp16
  const Options options_;
  const Methods methods_;
  ReplicaChoice choice_;
  // The StepStreams' events; it outlives them (declared before shards_).
  StepQueue queue_;
  const JobSecurity security_;
  std::vector<grpc::ChannelArguments> channel_args_;  // By shard.
  mutable absl::Mutex conns_mu_;
  std::vector<Link> shards_;
  // Connections replaced by FollowServers (a heartbeat may still use one).
  std::vector<std::unique_ptr<const Conn>> retired_ ABSL_GUARDED_BY(conns_mu_);
  // Bytes of each shard's push and pull areas.
  std::vector<std::pair<size_t, size_t>> segment_bytes_;
  std::atomic<bool> refused_{false};
};

// The deadline of a call that may take `d` from now.
std::chrono::system_clock::time_point DeadlineIn(absl::Duration d);

// Runs `start(shard, queue, done)` for every shard at once on a StepQueue
// of its own, which this thread polls until every call ended; each call
// reports how it ended through `done` (a shard with nothing to do calls it
// at once and returns null). Returns the first failure, naming the RPC and
// the shard.
absl::Status QueuedStreamsForAllShards(
    int num_shards, const char* rpc,
    const std::function<std::unique_ptr<QueuedStream>(
        int, StepQueue*, std::function<void(absl::Status)>)>& start);

// ForAllShards for calls on gRPC's async API, which the calling thread
// polls itself (no callback thread of gRPC's is started or woken: see
// step_queue.h). `start(shard, cq, status, tag)` starts the shard's call
// on `cq` and asks for its end by Finish(..., status, tag); once it ended,
// `ended(shard, status)` runs here and returns the call's result (e.g. its
// reply read). Returns the first failure, naming the RPC and the shard.
absl::Status QueuedForAllShards(
    int num_shards, const char* rpc,
    const std::function<void(int, grpc::CompletionQueue*, grpc::Status*,
                             void*)>& start,
    const std::function<absl::Status(int, absl::Status)>& ended);

}  // namespace paramd

#endif  // PARAMD_WORKER_RPC_SHARD_LINKS_H_
