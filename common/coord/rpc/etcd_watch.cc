// EtcdWatch (common/coord/rpc/etcd_client.h): a Watch call's reader thread
// and the events it hands out.
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/coord/rpc/etcd_client.h"
#include "common/coord/rpc/etcd_watch_stream.h"

namespace paramd {

namespace pb = ::etcdserverpb;

EtcdWatch::EtcdWatch(std::unique_ptr<Stream> stream)
    : stream_(std::move(stream)) {
  stream_->reader = std::thread([this] { Read(); });
}

EtcdWatch::~EtcdWatch() {
  stream_->context.TryCancel();
  if (stream_->reader.joinable()) stream_->reader.join();
}

void EtcdWatch::Read() {
  Stream& s = *stream_;
  pb::WatchResponse response;
  absl::Status end;
  while (s.call->Read(&response)) {
    if (response.canceled()) {
      end = absl::AbortedError(absl::StrCat(
          "etcd ", s.what, ": cancelled by etcd",
          response.compact_revision() > 0
              ? absl::StrCat(" (revisions up to ", response.compact_revision(),
                             " were compacted)")
              : std::string(),
          response.cancel_reason().empty() ? "" : ": ",
          response.cancel_reason()));
      break;
    }
    std::vector<EtcdEvent> events;
    for (const ::mvccpb::Event& e : response.events()) {
      EtcdEvent event;
      event.type = e.type() == ::mvccpb::Event::DELETE
                       ? EtcdEvent::Type::kDelete
                       : EtcdEvent::Type::kPut;
      event.kv = etcd_internal::FromProto(e.kv());
      events.push_back(std::move(event));
    }
    absl::MutexLock lock(&s.mu);
    if (response.created()) s.created = true;
    for (EtcdEvent& e : events) s.events.push_back(std::move(e));
  }
  s.context.TryCancel();  // Etcd's cancel: the call ends here too.
  const grpc::Status st = s.call->Finish();
  if (end.ok()) {
    end = absl::UnavailableError(
        absl::StrCat("etcd ", s.what, ": the stream ended",
                     st.ok() ? std::string() : ": " + st.error_message()));
  }
  absl::MutexLock lock(&s.mu);
  s.ended = end;
}

absl::StatusOr<std::vector<EtcdEvent>> EtcdWatch::Next(absl::Time deadline) {
  Stream& s = *stream_;
  absl::MutexLock lock(&s.mu);
  auto ready = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    return !s.events.empty() || !s.ended.ok();
  };
  s.mu.AwaitWithDeadline(absl::Condition(&ready), deadline);
  if (!s.events.empty()) return std::exchange(s.events, {});
  if (!s.ended.ok()) return s.ended;
  return std::vector<EtcdEvent>();
}

}  // namespace paramd
