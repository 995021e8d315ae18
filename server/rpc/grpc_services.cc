#include "server/rpc/grpc_services.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/rpc/credentials.h"
#include "common/rpc/grpc_frames.h"
#include "common/rpc/grpc_status.h"
#include "common/wire/row_wire.h"
#include "common/wire/wire_format.h"
#include "server/declare/model_declaration.h"
#include "server/rpc/byte_methods.h"
#include "server/rpc/push_pieces.h"
#include "server/rpc/step_stream_reactor.h"
#include "server/rpc/stream_reactors.h"

namespace paramd {

std::string GrpcParameterService::MethodName(const char* rpc) {
  return ServedMethods::MethodName(proto::ParameterService::service_full_name(),
                                   rpc);
}

template <typename Handler>
void GrpcParameterService::AddUnary(ServedMethods* methods, const char* rpc,
                                    Handler handler, bool faulty) {
  methods->AddUnaryMember(MethodName(rpc), rpc, security_, this, handler,
                          faulty ? faults_ : nullptr);
}

template <typename Reactor>
void GrpcParameterService::AddReactor(ServedMethods* methods, const char* rpc) {
  methods->AddStream(MethodName(rpc),
                     [this](AsyncCallQueue* queue,
                            std::unique_ptr<CallSlot> slot) -> AsyncCall* {
                       return new Reactor(this, queue, std::move(slot));
                     });
}

GrpcParameterService::GrpcParameterService(Shard* shard,
                                           const JobSecurity* security,
                                           const ReplyFaults* faults)
    : shard_(shard), security_(security), faults_(faults) {}

void GrpcParameterService::AddTo(ServedMethods* methods) {
  AddUnary(methods, "DeclareModel", &GrpcParameterService::DeclareModel);
  AddUnary(methods, "Register", &GrpcParameterService::Register);
  // The calls that carry tensors get the testing section's reply faults.
  AddUnary(methods, "Push", &GrpcParameterService::Push, /*faulty=*/true);
  AddUnary(methods, "Pull", &GrpcParameterService::Pull, /*faulty=*/true);
  AddUnary(methods, "PushPull", &GrpcParameterService::PushPull,
           /*faulty=*/true);
  AddUnary(methods, "PullRows", &GrpcParameterService::PullRows,
           /*faulty=*/true);
  AddUnary(methods, "Initialize", &GrpcParameterService::Initialize);
  AddUnary(methods, "Heartbeat", &GrpcParameterService::Heartbeat);
  AddUnary(methods, "ReportEpoch", &GrpcParameterService::ReportEpoch);
  AddReactor<PushStreamReactor>(methods, "PushStream");
  AddReactor<PullStreamReactor>(methods, "PullStream");
  AddReactor<StepStreamReactor>(methods, "StepStream");
}

grpc::Status GrpcParameterService::DeclareModel(grpc::ServerContext*,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) {
  // The shard has its model: a declaration must be that model.
  return ServeMessage<proto::DeclareModelRequest, proto::DeclareModelResponse>(
      "DeclareModel", *request, response,
      [this](const proto::DeclareModelRequest& r,
             proto::DeclareModelResponse* out) {
        return CheckDeclaration(shard_->config(), shard_->shard_id(),
                                shard_->launch(), r, out)
            .status();
      });
}

grpc::Status GrpcParameterService::Register(grpc::ServerContext*,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) {
  return ServeMessage<proto::RegisterRequest, proto::RegisterResponse>(
      "Register", *request, response,
      [this](const proto::RegisterRequest& r, proto::RegisterResponse* out) {
        return shard_->Register(r, out);
      });
}

absl::Status GrpcParameterService::ApplyPush(const char* rpc,
                                             const grpc::ByteBuffer& request,
                                             PushView* view,
                                             proto::PushResponse* reply,
                                             PushHandler apply) {
  ReceivedFrame frame;
  std::unique_ptr<float[]> storage;
  RETURN_IF_ERROR(CheckSize(rpc, request, shard_->max_message_bytes()));
  RETURN_IF_ERROR(frame.Take(request));
  RETURN_IF_ERROR(DecodePush(frame.segments(), view, &storage));
  return (shard_->*apply)(*view, reply);
}

grpc::Status GrpcParameterService::Push(grpc::ServerContext*,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) {
  PushView view;
  proto::PushResponse reply;
  if (absl::Status s = ApplyPush("Push", *request, &view, &reply); !s.ok()) {
    return ToGrpcStatus(s);
  }
  *response = SerializeMessage(reply);
  return grpc::Status::OK;
}

grpc::Status GrpcParameterService::Initialize(grpc::ServerContext*,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  PushView view;
  proto::PushResponse reply;
  if (absl::Status s =
          ApplyPush("Initialize", *request, &view, &reply, &Shard::Initialize);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  *response = SerializeMessage(reply);
  return grpc::Status::OK;
}

// Waits for the pull's version; the snapshot holds it.
absl::Status GrpcParameterService::WaitPull(
    grpc::ServerContext* context, Cancellation* cancel, const char* rpc,
    const grpc::ByteBuffer& request,
    std::shared_ptr<const ParamSnapshot>* snapshot, proto::PullRequest* pull) {
  RETURN_IF_ERROR(ParsePull(rpc, request, pull));
  return AwaitPull(context, cancel, *pull, snapshot);
}

int64_t PullStreamMessageBytes(const proto::PullRequest& pull) {
  return pull.stream_message_bytes() > 0 ? pull.stream_message_bytes()
                                         : kStreamMessageBytes;
}

absl::Status GrpcParameterService::ParsePull(const char* rpc,
                                             const grpc::ByteBuffer& request,
                                             proto::PullRequest* pull) {
  RETURN_IF_ERROR(CheckSize(rpc, request, kSmallMessageBytes));
  if (!ParseMessage(request, pull)) {
    return absl::InvalidArgumentError(
        absl::StrCat(rpc, ": malformed PullRequest"));
  }
  return absl::OkStatus();
}

absl::Status GrpcParameterService::AwaitPull(
    grpc::ServerContext* context, Cancellation* cancel,
    const proto::PullRequest& pull,
    std::shared_ptr<const ParamSnapshot>* snapshot) {
  return shard_->Pull(pull, absl::FromChrono(context->deadline()), cancel,
                      snapshot);
}

grpc::ByteBuffer GrpcParameterService::PullFrame(
    const std::shared_ptr<const ParamSnapshot>& snapshot, size_t begin,
    size_t end, bool half) const {
  FrameBuilder frame(snapshot);
  frame.AddCopy(EncodePullHeader(snapshot->version));
  for (size_t i = begin; i < end; ++i) {
    const ChunkSpec& spec = shard_->store().chunk_spec(static_cast<int>(i));
    const absl::string_view data =
        half ? absl::string_view(
                   reinterpret_cast<const char*>(snapshot->Halves()[i].data()),
                   snapshot->params[i].size() * sizeof(uint16_t))
             : absl::string_view(
                   reinterpret_cast<const char*>(snapshot->params[i].data()),
                   snapshot->params[i].size() * sizeof(float));
    frame.AddCopy(EncodeChunkHeader(
        kPullChunksField, spec.tensor_id, spec.chunk_index,
        half ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32, data.size()));
    frame.AddReference(data);
  }
  return frame.Finish();
}

grpc::Status GrpcParameterService::Pull(grpc::ServerContext* context,
                                        Cancellation* cancel,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) {
  std::shared_ptr<const ParamSnapshot> snapshot;
  proto::PullRequest pull;
  if (absl::Status s =
          WaitPull(context, cancel, "Pull", *request, &snapshot, &pull);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  *response = PullFrame(snapshot, 0, snapshot->params.size(),
                        pull.dtype() == proto::DTYPE_FLOAT16);
  return grpc::Status::OK;
}

grpc::Status GrpcParameterService::PushPull(grpc::ServerContext* context,
                                            Cancellation* cancel,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) {
  return ToGrpcStatus(
      PushThenPull("PushPull", context, cancel, *request, response));
}

std::vector<grpc::ByteBuffer> GrpcParameterService::PullParts(
    const std::shared_ptr<const ParamSnapshot>& snapshot, bool half,
    int64_t message_bytes) const {
  std::vector<grpc::ByteBuffer> parts;
  if (message_bytes <= 0) {
    parts.push_back(PullFrame(snapshot, 0, snapshot->params.size(), half));
    return parts;
  }
  std::vector<int64_t> bytes;
  for (const std::vector<float>& p : snapshot->params) {
    bytes.push_back(static_cast<int64_t>(p.size()) * (half ? 2 : 4));
  }
  for (const auto& [begin, end] : GroupChunks(bytes, message_bytes)) {
    parts.push_back(PullFrame(snapshot, begin, end, half));
  }
  // A shard without chunks still answers with its version.
  if (parts.empty()) parts.push_back(PullFrame(snapshot, 0, 0, half));
  return parts;
}

std::vector<grpc::ByteBuffer> GrpcParameterService::PullInSegment(
    const std::shared_ptr<const ParamSnapshot>& snapshot, bool half,
    int64_t message_bytes, absl::Span<char> pull_area) const {
  const size_t element = half ? sizeof(uint16_t) : sizeof(float);
  size_t need = 0;
  for (const std::vector<float>& p : snapshot->params) {
    need += p.size() * element;
  }
  if (need > pull_area.size()) {
    return PullParts(snapshot, half, message_bytes);
  }
  std::string frame = EncodePullHeader(snapshot->version);
  size_t offset = 0;
  for (size_t i = 0; i < snapshot->params.size(); ++i) {
    const ChunkSpec& spec = shard_->store().chunk_spec(static_cast<int>(i));
    const size_t bytes = snapshot->params[i].size() * element;
    const void* data =
        half ? static_cast<const void*>(snapshot->Halves()[i].data())
             : static_cast<const void*>(snapshot->params[i].data());
    std::memcpy(pull_area.data() + offset, data, bytes);
    frame += EncodeSegmentChunk(
        kPullChunksField, spec.tensor_id, spec.chunk_index,
        half ? proto::DTYPE_FLOAT16 : proto::DTYPE_FLOAT32, offset, bytes);
    // Every chunk starts float-aligned.
    offset += (bytes + alignof(float) - 1) / alignof(float) * alignof(float);
  }
  shard_->NoteSharedMemory(0, need);
  FrameBuilder message(nullptr);
  message.AddCopy(frame);
  std::vector<grpc::ByteBuffer> parts;
  parts.push_back(message.Finish());
  return parts;
}

absl::Status GrpcParameterService::PushThenPull(const char* rpc,
                                                grpc::ServerContext* context,
                                                Cancellation* cancel,
                                                const grpc::ByteBuffer& request,
                                                grpc::ByteBuffer* response) {
  PushView view;
  proto::PushResponse pushed;
  RETURN_IF_ERROR(ApplyPush(rpc, request, &view, &pushed));
  // The pull of the next clock, on this thread: no hand-off between the
  // push that completes a version and the pull that waits for it.
  const proto::PullRequest pull = PullAfter(view);
  std::shared_ptr<const ParamSnapshot> snapshot;
  RETURN_IF_ERROR(AwaitPull(context, cancel, pull, &snapshot));
  *response = PullFrame(snapshot, 0, snapshot->params.size(),
                        pull.dtype() == proto::DTYPE_FLOAT16);
  return absl::OkStatus();
}

grpc::Status GrpcParameterService::PullRows(grpc::ServerContext* context,
                                            Cancellation* cancel,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) {
  if (absl::Status s =
          CheckSize("PullRows", *request, Shard::kMaxRowMessageBytes);
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  ReceivedFrame frame;
  PullRowsView view;
  std::string storage;
  absl::Status s = frame.Take(*request);
  if (s.ok()) s = DecodePullRows(frame.segments(), &view, &storage);
  auto reply = std::make_shared<Shard::RowsReply>();
  if (s.ok()) {
    s = shard_->PullRows(view, absl::FromChrono(context->deadline()), cancel,
                         reply.get());
  }
  if (!s.ok()) return ToGrpcStatus(s);
  const absl::string_view bytes = reply->bytes();
  FrameBuilder out(reply);
  out.AddCopy(EncodePullRowsHeader(reply->version, reply->dtype, bytes.size()));
  out.AddReference(bytes);
  *response = out.Finish();
  return grpc::Status::OK;
}

grpc::Status GrpcParameterService::Heartbeat(grpc::ServerContext*,
                                             const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) {
  return ServeMessage<proto::HeartbeatRequest, proto::HeartbeatResponse>(
      "Heartbeat", *request, response,
      [this](const proto::HeartbeatRequest& r, proto::HeartbeatResponse* out) {
        return shard_->Heartbeat(r, out);
      });
}

grpc::Status GrpcParameterService::ReportEpoch(grpc::ServerContext*,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) {
  return ServeMessage<proto::ReportEpochRequest, proto::ReportEpochResponse>(
      "ReportEpoch", *request, response,
      [this](const proto::ReportEpochRequest& r, proto::ReportEpochResponse*) {
        return shard_->ReportEpoch(r);
      });
}

}  // namespace paramd
