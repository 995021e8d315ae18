#include "server/rpc/served_methods.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"

namespace paramd {
namespace {

// One call of a unary method.
class UnaryCall final : public AsyncCall {
 public:
  UnaryCall(AsyncCallQueue* queue, std::unique_ptr<CallSlot> slot,
            const char* rpc, const JobSecurity* security,
            const ServedMethods::UnaryHandler* handler,
            const ReplyFaults* faults)
      : AsyncCall(queue, std::move(slot)),
        rpc_(rpc),
        security_(security),
        handler_(handler),
        faults_(faults) {}

 private:
  void OnStart() override {
    const grpc::Status auth = CheckCallToken(*security_, *context(), rpc_);
    if (!auth.ok()) {
      Finish(auth);
      return;
    }
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client sent no request: it half-closed at once, cancelled, or
      // its deadline passed.
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat(rpc_, ": no request message")));
      return;
    }
    // The handler may wait; the call lives until it finishes (Finish is
    // the last thing the task does to it).
    queue()->handler_threads()->Run([this] {
      grpc::ByteBuffer response;
      const grpc::Status status =
          (*handler_)(context(), &cancel_, request_, &response);
      if (!status.ok()) {
        Finish(status);
        return;
      }
      if (faults_ == nullptr) {
        Finish(status, std::move(response));
        return;
      }
      response_ = std::move(response);
      HoldReply(*faults_, rpc_, &lost_);  // OnAlarm answers.
    });
  }
  // The reply, after the delay the faults drew: lost, or sent.
  void OnAlarm() override {
    if (!lost_.ok()) {
      Finish(ToGrpcStatus(lost_));
      return;
    }
    Finish(grpc::Status::OK, std::move(response_));
  }
  // A handler waiting stops; a cancelled call need not wait out a held
  // reply.
  void OnCancel() override {
    cancel_.Cancel();
    CancelAlarm();
  }

  const char* const rpc_;
  const JobSecurity* const security_;
  const ServedMethods::UnaryHandler* const handler_;
  const ReplyFaults* const faults_;
  grpc::ByteBuffer request_;
  Cancellation cancel_;
  // A handled call's reply and its fate, until it is sent.
  grpc::ByteBuffer response_;
  absl::Status lost_;
};

// A call of a method this server does not serve.
class UnknownMethodCall final : public AsyncCall {
 public:
  UnknownMethodCall(AsyncCallQueue* queue, std::unique_ptr<CallSlot> slot)
      : AsyncCall(queue, std::move(slot)) {}

 private:
  void OnStart() override {
    Finish(grpc::Status(
        grpc::StatusCode::UNIMPLEMENTED,
        absl::StrCat("paramd-server has no method ", context()->method())));
  }
};

}  // namespace

std::string ServedMethods::MethodName(absl::string_view service,
                                      absl::string_view rpc) {
  return absl::StrCat("/", service, "/", rpc);
}

void ServedMethods::AddStream(std::string name, MakeCall make) {
  methods_[std::move(name)] = std::move(make);
}

void ServedMethods::AddUnary(std::string name, const char* rpc,
                             const JobSecurity* security, UnaryHandler handler,
                             const ReplyFaults* faults) {
  // The handler lives in the closure, which the table keeps.
  auto shared = std::make_shared<const UnaryHandler>(std::move(handler));
  methods_[std::move(name)] =
      [rpc, security, shared, faults](
          AsyncCallQueue* queue, std::unique_ptr<CallSlot> slot) -> AsyncCall* {
    return new UnaryCall(queue, std::move(slot), rpc, security, shared.get(),
                         faults);
  };
}

AsyncCall* ServedMethods::Make(AsyncCallQueue* queue,
                               std::unique_ptr<CallSlot> slot) const {
  auto method = methods_.find(slot->context()->method());
  if (method == methods_.end()) {
    return new UnknownMethodCall(queue, std::move(slot));
  }
  return method->second(queue, std::move(slot));
}

absl::Status ServedMethods::Serve(
    grpc::ServerBuilder* builder, grpc::AsyncGenericService* generic,
    const int* port, const std::string& address, absl::string_view more,
    std::unique_ptr<grpc::Server>* server,
    std::unique_ptr<AsyncCallQueue>* calls) const {
  builder->RegisterAsyncGenericService(generic);
  std::unique_ptr<grpc::ServerCompletionQueue> cq =
      builder->AddCompletionQueue();
  *server = builder->BuildAndStart();
  *calls = std::make_unique<AsyncCallQueue>(std::move(cq), generic);
  if (*server == nullptr || *port == 0) {
    server->reset();
    calls->reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address,
        ": the port is in use, or the address is not local", more));
  }
  (*calls)->Start(
      [this](AsyncCallQueue* queue, std::unique_ptr<CallSlot> slot) {
        return Make(queue, std::move(slot));
      });
  return absl::OkStatus();
}

}  // namespace paramd
