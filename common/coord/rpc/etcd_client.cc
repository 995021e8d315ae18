#include "common/coord/rpc/etcd_client.h"

#include <grpcpp/grpcpp.h>

#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status_macros.h"
#include "common/coord/rpc/etcd_watch_stream.h"
#include "common/rpc/grpc_status.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "etcd/mvcc/mvccpb/kv.pb.h"

namespace paramd {
namespace {

namespace pb = ::etcdserverpb;

// The end of the range of keys that start with `prefix` (etcd's range_end:
// the prefix with its last byte below 0xff incremented; "\0" — every key —
// for an empty prefix or one of 0xff bytes only).
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

// A key quoted for an error message.
std::string Quoted(absl::string_view key) {
  return absl::StrCat("\"", key, "\"");
}

}  // namespace

namespace etcd_internal {

EtcdKeyValue FromProto(const ::mvccpb::KeyValue& kv) {
  EtcdKeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

}  // namespace etcd_internal

struct EtcdClient::Member {
  std::string endpoint;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Watch::Stub> watch;
  std::unique_ptr<pb::Auth::Stub> auth;
};

EtcdClient::EtcdClient(std::vector<std::string> endpoints, Options options)
    : endpoints_(std::move(endpoints)), options_(options) {
  for (const std::string& endpoint : endpoints_) {
    auto m = std::make_unique<Member>();
    m->endpoint = endpoint;
    grpc::ChannelArguments args;
    // A member that went away is tried again at once when asked, not
    // after gRPC's reconnect backoff (up to two minutes).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // A watch on a member whose host went silent ends within 15 s instead
    // of waiting for ever (etcd allows a ping every 5 s, while a call is
    // open).
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    if (options_.credentials != nullptr) {
      const std::string name =
          !options_.server_name.empty()         ? options_.server_name
          : absl::StartsWith(endpoint, "unix:") ? std::string("localhost")
                                                : std::string();
      if (!name.empty()) args.SetSslTargetNameOverride(name);
    }
    m->channel = grpc::CreateCustomChannel(
        endpoint,
        options_.credentials != nullptr ? options_.credentials
                                        : grpc::InsecureChannelCredentials(),
        args);
    m->kv = pb::KV::NewStub(m->channel);
    m->lease = pb::Lease::NewStub(m->channel);
    m->watch = pb::Watch::NewStub(m->channel);
    m->auth = pb::Auth::NewStub(m->channel);
    members_.push_back(std::move(m));
  }
}

EtcdClient::~EtcdClient() = default;

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(
    const std::vector<std::string>& endpoints, Options options) {
  if (endpoints.empty()) {
    return absl::InvalidArgumentError(
        "etcd client: no endpoints (HOST:PORT or unix:PATH)");
  }
  for (size_t i = 0; i < endpoints.size(); ++i) {
    if (endpoints[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd client: endpoint [", i, "] is empty"));
    }
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd client: the timeout must be > 0");
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(endpoints, options));
}

namespace {

// etcd's answer to a call whose token is no longer valid (it expired, or
// the member restarted and forgot it).
bool TokenRefused(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
         absl::StrContains(s.error_message(), "invalid auth token");
}

}  // namespace

absl::StatusOr<std::string> EtcdClient::Token(Member& m, bool fresh) {
  if (options_.user.empty()) return std::string();
  absl::MutexLock lock(&token_mu_);
  if (!token_.empty() && !fresh) return token_;
  pb::AuthenticateRequest request;
  request.set_name(options_.user);
  request.set_password(options_.password);
  pb::AuthenticateResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  const grpc::Status s = m.auth->Authenticate(&context, request, &response);
  if (!s.ok()) {
    return absl::Status(
        FromGrpcStatus(s).code(),
        absl::StrCat("etcd Authenticate as user '", options_.user, "' at ",
                     m.endpoint, ": ", s.error_message()));
  }
  token_ = response.token();
  return token_;
}

template <typename Call>
absl::Status EtcdClient::OnMembers(const std::string& what, const Call& call) {
  const size_t first = current_.load(std::memory_order_relaxed);
  absl::Status last;
  for (size_t n = 0; n < members_.size(); ++n) {
    const size_t i = (first + n) % members_.size();
    Member& m = *members_[i];
    grpc::Status s;
    // With authentication, a refused token is renewed once.
    for (bool fresh : {false, true}) {
      absl::StatusOr<std::string> token = Token(m, fresh);
      if (!token.ok()) {
        s = grpc::Status(static_cast<grpc::StatusCode>(token.status().code()),
                         std::string(token.status().message()));
        break;
      }
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
      if (!token->empty()) context.AddMetadata("token", *token);
      s = call(m, &context);
      if (token->empty() || !TokenRefused(s)) break;
    }
    if (s.ok()) {
      current_.store(i, std::memory_order_relaxed);
      return absl::OkStatus();
    }
    last = absl::Status(FromGrpcStatus(s).code(),
                        absl::StrCat("etcd ", what, " at ", m.endpoint, ": ",
                                     s.error_message()));
    // Only a member that could not serve it is worth another's try: any
    // other answer is the cluster's.
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
        s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return last;
    }
  }
  return last;
}

absl::StatusOr<std::optional<EtcdKeyValue>> EtcdClient::Get(
    const std::string& key) {
  pb::RangeRequest request;
  request.set_key(key);
  pb::RangeResponse response;
  RETURN_IF_ERROR(OnMembers(absl::StrCat("Range ", Quoted(key)),
                            [&](Member& m, grpc::ClientContext* c) {
                              return m.kv->Range(c, request, &response);
                            }));
  if (response.kvs_size() == 0) return std::optional<EtcdKeyValue>();
  return std::optional<EtcdKeyValue>(etcd_internal::FromProto(response.kvs(0)));
}

absl::StatusOr<EtcdRange> EtcdClient::List(const std::string& prefix) {
  pb::RangeRequest request;
  request.set_key(prefix.empty() ? std::string(1, '\0') : prefix);
  request.set_range_end(PrefixEnd(prefix));
  pb::RangeResponse response;
  RETURN_IF_ERROR(OnMembers(absl::StrCat("Range of prefix ", Quoted(prefix)),
                            [&](Member& m, grpc::ClientContext* c) {
                              return m.kv->Range(c, request, &response);
                            }));
  EtcdRange out;
  out.revision = response.header().revision();
  for (const ::mvccpb::KeyValue& kv : response.kvs()) {
    out.kvs.push_back(etcd_internal::FromProto(kv));
  }
  return out;
}

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key,
                                        const std::string& value,
                                        int64_t lease) {
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  pb::PutResponse response;
  RETURN_IF_ERROR(OnMembers(absl::StrCat("Put ", Quoted(key)),
                            [&](Member& m, grpc::ClientContext* c) {
                              return m.kv->Put(c, request, &response);
                            }));
  return response.header().revision();
}

absl::StatusOr<bool> EtcdClient::Delete(const std::string& key) {
  pb::DeleteRangeRequest request;
  request.set_key(key);
  pb::DeleteRangeResponse response;
  RETURN_IF_ERROR(OnMembers(absl::StrCat("DeleteRange ", Quoted(key)),
                            [&](Member& m, grpc::ClientContext* c) {
                              return m.kv->DeleteRange(c, request, &response);
                            }));
  return response.deleted() > 0;
}

absl::StatusOr<EtcdClaim> EtcdClient::Create(const std::string& key,
                                             const std::string& value,
                                             int64_t lease) {
  return WriteIf(key, /*exists=*/false, 0, value, lease);
}

absl::StatusOr<EtcdClaim> EtcdClient::ReplaceAt(const std::string& key,
                                                int64_t mod_revision,
                                                const std::string& value,
                                                int64_t lease) {
  if (mod_revision < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd ReplaceAt ", Quoted(key), ": a negative revision"));
  }
  return WriteIf(key, mod_revision > 0, mod_revision, value, lease);
}

absl::StatusOr<EtcdClaim> EtcdClient::WriteIf(const std::string& key,
                                              bool exists, int64_t mod_revision,
                                              const std::string& value,
                                              int64_t lease) {
  ASSIGN_OR_RETURN(EtcdTxnResult result,
                   Txn({exists ? EtcdCondition::ModifiedAt(key, mod_revision)
                               : EtcdCondition::Absent(key)},
                       {EtcdWrite{key, value, lease}}));
  EtcdClaim claim;
  claim.written = result.written;
  claim.revision = result.revision;
  if (!result.written) claim.holder = std::move(result.found[0]);
  return claim;
}

EtcdCondition EtcdCondition::Absent(std::string key) {
  // A key that does not exist has create revision 0.
  return CreatedAt(std::move(key), 0);
}

EtcdCondition EtcdCondition::CreatedAt(std::string key,
                                       int64_t create_revision) {
  EtcdCondition c;
  c.key = std::move(key);
  c.revision = create_revision;
  return c;
}

EtcdCondition EtcdCondition::ModifiedAt(std::string key, int64_t mod_revision) {
  EtcdCondition c;
  c.key = std::move(key);
  c.on = On::kModRevision;
  c.revision = mod_revision;
  return c;
}

EtcdCondition EtcdCondition::ValueIs(std::string key, std::string value) {
  EtcdCondition c;
  c.key = std::move(key);
  c.on = On::kValue;
  c.value = std::move(value);
  return c;
}

absl::StatusOr<EtcdTxnResult> EtcdClient::Txn(
    const std::vector<EtcdCondition>& conditions,
    const std::vector<EtcdWrite>& writes) {
  if (conditions.empty()) {
    return absl::InvalidArgumentError("etcd Txn: no condition");
  }
  pb::TxnRequest request;
  for (const EtcdCondition& c : conditions) {
    pb::Compare* compare = request.add_compare();
    compare->set_key(c.key);
    compare->set_result(pb::Compare::EQUAL);
    switch (c.on) {
      case EtcdCondition::On::kValue:
        compare->set_target(pb::Compare::VALUE);
        compare->set_value(c.value);
        break;
      case EtcdCondition::On::kModRevision:
        compare->set_target(pb::Compare::MOD);
        compare->set_mod_revision(c.revision);
        break;
      case EtcdCondition::On::kCreateRevision:
        compare->set_target(pb::Compare::CREATE);
        compare->set_create_revision(c.revision);
        break;
    }
    request.add_failure()->mutable_request_range()->set_key(c.key);
  }
  for (const EtcdWrite& w : writes) {
    pb::PutRequest* put = request.add_success()->mutable_request_put();
    put->set_key(w.key);
    put->set_value(w.value);
    put->set_lease(w.lease);
  }
  pb::TxnResponse response;
  RETURN_IF_ERROR(OnMembers(absl::StrCat("Txn on ", Quoted(conditions[0].key)),
                            [&](Member& m, grpc::ClientContext* c) {
                              return m.kv->Txn(c, request, &response);
                            }));
  EtcdTxnResult result;
  result.written = response.succeeded();
  result.revision = response.header().revision();
  if (!result.written) {
    for (const pb::ResponseOp& op : response.responses()) {
      const pb::RangeResponse& range = op.response_range();
      result.found.push_back(
          range.kvs_size() > 0
              ? std::optional(etcd_internal::FromProto(range.kvs(0)))
              : std::nullopt);
    }
    result.found.resize(conditions.size());
  }
  return result;
}

absl::StatusOr<int64_t> EtcdClient::Grant(absl::Duration ttl,
                                          absl::Duration* granted) {
  const int64_t seconds =
      absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)));
  if (seconds <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd LeaseGrant: a lease of ", absl::FormatDuration(ttl),
                     "; it must be at least a second"));
  }
  pb::LeaseGrantRequest request;
  request.set_ttl(seconds);
  pb::LeaseGrantResponse response;
  RETURN_IF_ERROR(OnMembers(absl::StrCat("LeaseGrant of ", seconds, " s"),
                            [&](Member& m, grpc::ClientContext* c) {
                              return m.lease->LeaseGrant(c, request, &response);
                            }));
  if (!response.error().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd LeaseGrant: ", response.error()));
  }
  if (granted != nullptr) *granted = absl::Seconds(response.ttl());
  return response.id();
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAlive(int64_t lease) {
  pb::LeaseKeepAliveResponse response;
  bool answered = false;
  RETURN_IF_ERROR(
      OnMembers(absl::StrCat("LeaseKeepAlive of lease ", lease),
                [&](Member& m, grpc::ClientContext* c) {
                  // The stream carries one renewal: asked, answered, closed.
                  auto stream = m.lease->LeaseKeepAlive(c);
                  pb::LeaseKeepAliveRequest request;
                  request.set_id(lease);
                  answered = stream->Write(request) && stream->Read(&response);
                  stream->WritesDone();
                  if (answered) c->TryCancel();  // No more to read.
                  grpc::Status s = stream->Finish();
                  if (answered) return grpc::Status::OK;
                  if (s.ok()) {
                    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                        "the stream ended without an answer");
                  }
                  return s;
                }));
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd LeaseKeepAlive: lease ",
                                            lease, " expired or was revoked"));
  }
  return absl::Seconds(response.ttl());
}

absl::Status EtcdClient::Revoke(int64_t lease) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease);
  pb::LeaseRevokeResponse response;
  return OnMembers(absl::StrCat("LeaseRevoke of lease ", lease),
                   [&](Member& m, grpc::ClientContext* c) {
                     return m.lease->LeaseRevoke(c, request, &response);
                   });
}

absl::StatusOr<std::unique_ptr<EtcdWatch>> EtcdClient::Watch(
    const std::string& prefix, int64_t start_revision) {
  pb::WatchRequest request;
  pb::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(prefix.empty() ? std::string(1, '\0') : prefix);
  create->set_range_end(PrefixEnd(prefix));
  create->set_start_revision(start_revision);
  // As OnMembers, but the call outlives this function: only its creation
  // is bounded by the timeout, not the watch.
  absl::Status last;
  const size_t first = current_.load(std::memory_order_relaxed);
  for (size_t n = 0; n < members_.size(); ++n) {
    const size_t i = (first + n) % members_.size();
    Member& m = *members_[i];
    auto stream = std::make_unique<EtcdWatch::Stream>();
    stream->what =
        absl::StrCat("Watch of prefix ", Quoted(prefix), " at ", m.endpoint);
    absl::StatusOr<std::string> token = Token(m, /*fresh=*/false);
    if (!token.ok()) {
      last = token.status();
      continue;
    }
    if (!token->empty()) stream->context.AddMetadata("token", *token);
    stream->call = m.watch->Watch(&stream->context);
    // A member that is down fails the write, and the reader's first read
    // ends the stream at once.
    stream->call->Write(request);
    EtcdWatch::Stream* s = stream.get();
    std::unique_ptr<EtcdWatch> watch(new EtcdWatch(std::move(stream)));
    absl::Status made;
    {
      absl::MutexLock lock(&s->mu);
      auto settled = [s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
        return s->created || !s->ended.ok();
      };
      s->mu.AwaitWithTimeout(absl::Condition(&settled), options_.timeout);
      if (!s->created) {
        made = !s->ended.ok() ? s->ended
                              : absl::DeadlineExceededError(absl::StrCat(
                                    "etcd ", s->what, ": not made within ",
                                    absl::FormatDuration(options_.timeout)));
      }
    }
    if (made.ok()) {
      current_.store(i, std::memory_order_relaxed);
      return watch;
    }
    last = made;
    if (made.code() == absl::StatusCode::kAborted) return last;  // etcd's no.
  }
  return last;
}

}  // namespace paramd
