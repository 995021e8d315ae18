#include "tools/status_client.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/create_channel.h>

#include <future>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/rpc/grpc_status.h"
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
    return absl::Status(
        st.code(), absl::StrCat("GetStatus to ", address, ": ", st.message()));
  }
  return response;
}

std::vector<ServerStatus> QueryAllStatus(
    const std::vector<std::string>& addresses, absl::Duration timeout) {
  std::vector<std::future<absl::StatusOr<proto::ShardStatus>>> pending;
  for (const std::string& a : addresses) {
    pending.push_back(
        std::async(std::launch::async, QueryShardStatus, a, timeout));
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
  const proto::ShardStatus* shard0 = nullptr;
  for (const ServerStatus& s : servers) {
    if (!s.status.ok()) continue;
    if (first == nullptr) first = &*s.status;
    if (s.status->shard() == 0) shard0 = &*s.status;
  }
  if (first != nullptr) {
    std::string policy = first->policy();
    if (first->staleness_bound() >= 0) {
      absl::StrAppend(&policy, " (staleness ", first->staleness_bound(), ")");
    }
    absl::StrAppendFormat(&out, "job %s   policy %s   %d shard(s)   lease %gs",
                          first->job_id(), policy, servers.size(),
                          first->lease_seconds());
    if (shard0 != nullptr) {
      int done = 0;
      double accuracy = -1;
      for (const proto::EpochMetrics& e : shard0->epochs()) {
        if (e.complete()) {
          done = static_cast<int>(e.epoch());
          accuracy = e.test_accuracy();
        }
      }
      absl::StrAppendFormat(&out, "   epoch %d/%d", done,
                            shard0->total_epochs());
      if (accuracy >= 0) {
        absl::StrAppendFormat(&out, "   last test accuracy %.4f", accuracy);
      }
    }
    out += "\n\n";
  }
  absl::StrAppendFormat(
      &out, "%-5s %-21s %-5s %6s %10s %8s %8s %9s %9s %9s %9s\n", "SHARD",
      "ADDRESS", "STATE", "CHUNKS", "BYTES", "VERSION", "PUSHES/S", "WAIT_P50",
      "WAIT_P99", "MB_IN", "MB_OUT");
  for (size_t i = 0; i < servers.size(); ++i) {
    const ServerStatus& s = servers[i];
    if (!s.status.ok()) {
      absl::StrAppendFormat(&out, "%-5d %-21s %-5s %s\n", i, s.address, "DOWN",
                            std::string(s.status.status().message()));
      continue;
    }
    const proto::ShardStatus& st = *s.status;
    absl::StrAppendFormat(
        &out,
        "%-5d %-21s %-5s %6d %10d %8d %8.1f %7.1fms %7.1fms %9.1f %9.1f\n",
        st.shard(), s.address, "up", st.chunks(), st.bytes(), st.version(),
        st.pushes_per_second(), st.pull_wait_p50_ms(), st.pull_wait_p99_ms(),
        st.bytes_in() / 1e6, st.bytes_out() / 1e6);
  }
  // Workers as the first shard that answered sees them; traffic summed
  // over all shards.
  if (first != nullptr) {
    absl::StrAppendFormat(
        &out, "\n%-5s %-9s %8s %7s %10s %8s %9s %9s %10s %9s\n", "RANK",
        "STATE", "CLOCK", "BEHIND", "LAST_SEEN", "PUSHES", "MB_SENT", "MB_RECV",
        "LAST_LOSS", "PROCESSES");
    for (int r = 0; r < first->workers_size(); ++r) {
      const proto::WorkerStatus& w = first->workers(r);
      uint64_t in = 0, out_bytes = 0;
      for (const ServerStatus& s : servers) {
        if (s.status.ok() && r < s.status->workers_size()) {
          in += s.status->workers(r).bytes_in();
          out_bytes += s.status->workers(r).bytes_out();
        }
      }
      absl::StrAppendFormat(
          &out, "%-5d %-9s %8d %7d %10s %8d %9.1f %9.1f %10.4f %9d\n", w.rank(),
          w.state(), w.clock(), w.staleness(),
          w.last_seen_seconds_ago() < 0
              ? "-"
              : absl::StrFormat("%.1fs ago", w.last_seen_seconds_ago()),
          w.pushes(), in / 1e6, out_bytes / 1e6, w.last_loss(),
          w.registrations());
    }
  }
  bool any_waiting = false;
  for (const ServerStatus& s : servers) {
    if (!s.status.ok()) continue;
    for (const proto::WaitingPull& p : s.status->waiting()) {
      if (!any_waiting) out += "\nWAITING PULLS\n";
      any_waiting = true;
      absl::StrAppendFormat(&out,
                            "  shard %d: rank %d at clock %d, %.1fs: %s\n",
                            s.status->shard(), p.rank(), p.clock(),
                            p.waited_seconds(), p.waiting_on());
    }
  }
  if (shard0 != nullptr && shard0->epochs_size() > 0) {
    absl::StrAppendFormat(&out, "\n%-6s %-9s %11s %10s %12s %8s\n", "EPOCH",
                          "REPORTED", "TRAIN_LOSS", "TEST_ACC", "SAMPLES/S",
                          "DONE");
    for (const proto::EpochMetrics& e : shard0->epochs()) {
      absl::StrAppendFormat(
          &out, "%-6d %-9s %11.4f %10.4f %12.0f %8s\n", e.epoch(),
          absl::StrCat(e.workers_reported(), "/", shard0->workers_size()),
          e.train_loss(), e.test_accuracy(), e.samples_per_second(),
          e.complete() ? "yes" : "no");
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
