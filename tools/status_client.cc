#include "tools/status_client.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/create_channel.h>

#include <future>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/grpc_status.h"
#include "proto/paramd.grpc.pb.h"

namespace paramd {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

absl::StatusOr<proto::ShardStatus> QueryShardStatus(const std::string& address,
                                                    absl::Duration timeout) {
  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = proto::StatusService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  proto::GetStatusRequest request;
  proto::ShardStatus response;
  grpc::Status s = stub->GetStatus(&context, request, &response);
  if (!s.ok()) {
    absl::Status st = FromGrpcStatus(s);
    return absl::Status(st.code(),
                        absl::StrCat("GetStatus to ", address, ": ", st.message()));
  }
  return response;
}

std::vector<ServerStatus> QueryAllStatus(
    const std::vector<std::string>& addresses, absl::Duration timeout) {
  std::vector<std::future<absl::StatusOr<proto::ShardStatus>>> pending;
  for (const std::string& a : addresses) {
    pending.push_back(std::async(std::launch::async, QueryShardStatus, a, timeout));
  }
  std::vector<ServerStatus> out;
  for (size_t i = 0; i < addresses.size(); ++i) {
    out.push_back({addresses[i], pending[i].get()});
  }
  return out;
}

std::string FormatStatusTable(const std::vector<ServerStatus>& servers) {
  std::string out;
  const proto::ShardStatus* first = nullptr;
  for (const ServerStatus& s : servers) {
    if (s.status.ok()) {
      first = &*s.status;
      break;
    }
  }
  if (first != nullptr) {
    absl::StrAppendFormat(&out, "job %s   policy %s   %d shard(s)\n\n",
                          first->job_id(), first->policy(), servers.size());
  }
  absl::StrAppendFormat(&out, "%-6s %-22s %-8s %7s %11s %9s %9s %9s %11s %11s\n",
                        "SHARD", "ADDRESS", "STATE", "CHUNKS", "BYTES",
                        "VERSION", "PUSHES", "PULLS", "MB_IN", "MB_OUT");
  struct WorkerSum {
    bool registered = false;
    uint64_t clock = 0, pushes = 0, pulls = 0, in = 0, out = 0;
    double seen = -1;
  };
  std::map<uint32_t, WorkerSum> workers;
  for (size_t i = 0; i < servers.size(); ++i) {
    const ServerStatus& s = servers[i];
    if (!s.status.ok()) {
      absl::StrAppendFormat(&out, "%-6d %-22s %-8s %s\n", i, s.address,
                            "DOWN", std::string(s.status.status().message()));
      continue;
    }
    const proto::ShardStatus& st = *s.status;
    absl::StrAppendFormat(&out, "%-6d %-22s %-8s %7d %11d %9d %9d %9d %11.1f %11.1f\n",
                          st.shard(), s.address, "up", st.chunks(), st.bytes(),
                          st.version(), st.pushes(), st.pulls(),
                          st.bytes_in() / 1e6, st.bytes_out() / 1e6);
    for (const proto::WorkerStatus& w : st.workers()) {
      WorkerSum& sum = workers[w.rank()];
      sum.registered |= w.registered();
      sum.clock = std::max<uint64_t>(sum.clock, w.clock());
      sum.pushes += w.pushes();
      sum.pulls += w.pulls();
      sum.in += w.bytes_in();
      sum.out += w.bytes_out();
      if (w.registered() &&
          (sum.seen < 0 || w.last_seen_seconds_ago() < sum.seen)) {
        sum.seen = w.last_seen_seconds_ago();
      }
    }
  }
  absl::StrAppendFormat(&out, "\n%-6s %-12s %9s %9s %9s %11s %11s %10s\n",
                        "RANK", "STATE", "CLOCK", "PUSHES", "PULLS", "MB_SENT",
                        "MB_RECV", "LAST_SEEN");
  for (const auto& [rank, w] : workers) {
    absl::StrAppendFormat(
        &out, "%-6d %-12s %9d %9d %9d %11.1f %11.1f %10s\n", rank,
        w.registered ? "registered" : "not seen", w.clock, w.pushes, w.pulls,
        w.in / 1e6, w.out / 1e6,
        w.seen < 0 ? "-" : absl::StrFormat("%.1fs ago", w.seen));
  }
  for (const ServerStatus& s : servers) {
    if (!s.status.ok() || s.status->shard() != 0) continue;
    absl::StrAppendFormat(&out, "\n%-6s %-9s %11s %10s %12s %8s\n", "EPOCH",
                          "REPORTED", "TRAIN_LOSS", "TEST_ACC", "SAMPLES/S",
                          "DONE");
    for (const proto::EpochMetrics& e : s.status->epochs()) {
      absl::StrAppendFormat(&out, "%-6d %-9s %11.4f %10.4f %12.0f %8s\n",
                            e.epoch(),
                            absl::StrCat(e.workers_reported(), "/",
                                         s.status->workers_size()),
                            e.train_loss(), e.test_accuracy(),
                            e.samples_per_second(), e.complete() ? "yes" : "no");
    }
  }
  return out;
}

std::string FormatStatusJson(const std::vector<ServerStatus>& servers) {
  std::string out = "{\"servers\": [";
  for (size_t i = 0; i < servers.size(); ++i) {
    const ServerStatus& s = servers[i];
    if (i > 0) out += ", ";
    absl::StrAppend(&out, "{\"address\": ", JsonString(s.address));
    if (s.status.ok()) {
      std::string json;
      google::protobuf::util::JsonPrintOptions options;
      options.always_print_primitive_fields = true;
      options.preserve_proto_field_names = true;
      (void)google::protobuf::util::MessageToJsonString(*s.status, &json,
                                                        options);
      absl::StrAppend(&out, ", \"ok\": true, \"status\": ", json, "}");
    } else {
      absl::StrAppend(&out, ", \"ok\": false, \"error\": ",
                      JsonString(std::string(s.status.status().message())),
                      "}");
    }
  }
  return out + "]}\n";
}

}  // namespace paramd
