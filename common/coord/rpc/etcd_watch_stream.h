// Internal to the etcd client (common/coord/rpc/etcd_client.h): one Watch
// call, as EtcdClient::Watch makes it and EtcdWatch reads it, and the key
// conversion both use.
#ifndef PARAMD_COMMON_COORD_RPC_ETCD_WATCH_STREAM_H_
#define PARAMD_COMMON_COORD_RPC_ETCD_WATCH_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/coord/rpc/etcd_client.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "etcd/mvcc/mvccpb/kv.pb.h"

namespace paramd {
namespace etcd_internal {

// A key as etcd's reply holds it.
EtcdKeyValue FromProto(const ::mvccpb::KeyValue& kv);

}  // namespace etcd_internal

// One Watch call: its stream, the reader thread, and what it read.
struct EtcdWatch::Stream {
  std::string what;  // For errors: "Watch of prefix ... at MEMBER".
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<::etcdserverpb::WatchRequest,
                                           ::etcdserverpb::WatchResponse>>
      call;
  std::thread reader;
  absl::Mutex mu;
  bool created ABSL_GUARDED_BY(mu) = false;  // etcd said it made the watch.
  std::vector<EtcdEvent> events ABSL_GUARDED_BY(mu);
  absl::Status ended ABSL_GUARDED_BY(mu);  // Not OK once the stream ended.
};

}  // namespace paramd

#endif  // PARAMD_COMMON_COORD_RPC_ETCD_WATCH_STREAM_H_
