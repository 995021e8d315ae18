#include "server/rpc/served_methods.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

// One call of a unary method.
class UnaryCall final : public AsyncCall {
 public:
  UnaryCall(AsyncCallQueue* queue, std::unique_ptr<CallSlot> slot,
            const char* rpc, const JobSecurity* security,
            const ServedMethods::UnaryHandler* handler)
      : AsyncCall(queue, std::move(slot)),
        rpc_(rpc),
        security_(security),
        handler_(handler) {}

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
      const grpc::Status status = (*handler_)(context(), request_, &response);
      Finish(status, status.ok()
                         ? std::optional<grpc::ByteBuffer>(std::move(response))
                         : std::nullopt);
    });
  }

  const char* const rpc_;
  const JobSecurity* const security_;
  const ServedMethods::UnaryHandler* const handler_;
  grpc::ByteBuffer request_;
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
                             const JobSecurity* security,
                             UnaryHandler handler) {
  // The handler lives in the closure, which the table keeps.
  auto shared = std::make_shared<const UnaryHandler>(std::move(handler));
  methods_[std::move(name)] =
      [rpc, security, shared](AsyncCallQueue* queue,
                              std::unique_ptr<CallSlot> slot) -> AsyncCall* {
    return new UnaryCall(queue, std::move(slot), rpc, security, shared.get());
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

}  // namespace paramd
