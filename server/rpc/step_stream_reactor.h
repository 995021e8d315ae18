// StepStreamReactor: one StepStream call (proto/paramd.proto) served on
// gRPC's async API by the server's one polling thread (AsyncCall,
// server/rpc/async_calls.h), so that a server's threads do not grow with
// the workers × shards streams open. A step's push is one message or several
// linked by PushRequest.more, each checked on the gRPC thread that read it
// while the next is on the wire, and applied on the thread that read the
// last; the pull of its clock + 1 then waits in the shard without a thread
// (Shard::StartPull), and its reply — one message, or as many as
// reply_message_bytes asks for, written one after another — goes out from
// the thread whose push made it readable (under sync: the round's last
// push); the next step is read once the reply is sent. One step at a
// time, in order. A step whose push asks for slices (PushRequest.slices,
// where ServersTakeSlices) is full-duplex instead: each message's chunks
// are applied as it is read (Shard::PushSlice) and answered, in order,
// once the round stepped them (a pull of those chunks), while the next
// message is read. A failed step ends the call with its status (the client
// opens a new stream); a cancelled call ends its waiting pull. The testing
// section's reply faults (delay, loss) act here, on the one serving path:
// a reply held back waits on the call's alarm.
//
// Thread-safe: the call's events run on the polling thread, the shard's
// (a waiting pull served) on any thread.
#ifndef PARAMD_SERVER_RPC_STEP_STREAM_REACTOR_H_
#define PARAMD_SERVER_RPC_STEP_STREAM_REACTOR_H_

#include <grpcpp/support/byte_buffer.h>

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/rpc/async_calls.h"
#include "server/rpc/grpc_services.h"
#include "server/rpc/push_pieces.h"
#include "server/rpc/waiting_pull.h"
#include "server/shard/push_assembler.h"

namespace paramd {

class StepStreamReactor final : public AsyncCall {
 public:
  // Serves the StepStream call in `slot` (or ends it: a missing or wrong
  // token); deletes itself when the call is done. `service` and `queue`
  // outlive it.
  StepStreamReactor(GrpcParameterService* service, AsyncCallQueue* queue,
                    std::unique_ptr<CallSlot> slot);

 private:
  void OnStart() override;
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;

  // The push in request_ is applied; starts the pull of `clock`.
  void StartPull(const proto::PullRequest& pull);
  // A step's pull ended: writes its reply, or ends the call.
  void Pulled(absl::StatusOr<std::shared_ptr<const ParamSnapshot>> snapshot,
              bool half);
  // The step's reply (its testing fault drawn): `lost` ends the call,
  // else the reply's parts are written.
  void Answer(const std::shared_ptr<const ParamSnapshot>& snapshot, bool half,
              const absl::Status& lost);
  // A reply held back by the reply faults goes on.
  void OnAlarm() override;
  // Ends the step and the call with `s`.
  void EndStep(const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu_);

  // A step in slices: applies the message just read (its chunks from
  // `first` of the push's on; the push's first message when
  // `first_message`; its last when `last`), reads on or ends the step's
  // reading.
  void ReadSlice(size_t first, bool first_message, bool last);
  // Starts the pull of the oldest slice not answered (answering_ set).
  void AnswerSlice() ABSL_LOCKS_EXCLUDED(mu_);
  // Its pull ended: writes its reply, or fails the step.
  void SlicePulled(
      absl::StatusOr<std::shared_ptr<const ParamSnapshot>> snapshot);
  // A slice's reply is written: the next slice's pull, the step's end, or
  // nothing until the next message is read.
  void SliceWritten() ABSL_LOCKS_EXCLUDED(mu_);
  // Fails the step in slices with `s` once no pull waits and no write is
  // out (a waiting pull is cancelled).
  void FailSlices(const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the call with `s`, once; only outside a step.
  void End(const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu_);

  GrpcParameterService* const service_;
  WaitingPull pull_;  // The step's.
  grpc::ByteBuffer request_;
  // The push of the step being read, until it is applied.
  std::unique_ptr<PushPieces> pieces_;
  // The shared memory the stream's pushes named (same-host steps).
  StreamSegment segment_;
  // The step's reply, written part after part; its message size
  // (reply_message_bytes), and the next part to write.
  std::vector<grpc::ByteBuffer> reply_;
  uint32_t reply_bytes_ = 0;
  size_t next_part_ = 0;
  // The step's pull for the timeline: rank and clock, and when its reply
  // began (InfinitePast untraced). Set before the reply's write starts,
  // read when it is done.
  int traced_rank_ = 0;
  uint64_t traced_clock_ = 0;
  absl::Time reply_begin_ = absl::InfinitePast();
  // A reply held back by the reply faults until the alarm.
  struct Held {
    std::shared_ptr<const ParamSnapshot> snapshot;
    bool half;
    absl::Status lost;
  };
  std::optional<Held> held_;
  // A slice's reply (in reply_) held back by the reply faults; lost, it
  // ends the step once the alarm comes.
  bool slice_held_ = false;
  absl::Status slice_lost_;
  // The step being read is in slices; its push's header.
  bool sliced_ = false;
  PushView header_;
  size_t read_chunks_ = 0;  // Chunks of the push applied so far.
  absl::Mutex mu_;
  // A step in slices: the chunks (local indices) of each slice applied
  // and not answered yet, oldest first; whether the oldest one's pull
  // waits or its reply is being written; whether the push's last message
  // was read; the status the step fails with once nothing is out.
  std::deque<std::vector<int>> unanswered_ ABSL_GUARDED_BY(mu_);
  bool answering_ ABSL_GUARDED_BY(mu_) = false;
  bool read_all_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> failed_ ABSL_GUARDED_BY(mu_);
  // From a push read to its reply's write: the call is ended (Finish) only
  // outside a step, so no pull in the shard outlives the reactor.
  bool in_step_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_RPC_STEP_STREAM_REACTOR_H_
