#include "tools/ctl/status_format.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/json_quote.h"

namespace paramd {
namespace {

// "job J   policy P   N shard(s)   lease Ls[   epoch E/T[   last test
// accuracy A]]", from the first shard that answered and shard 0.
std::string JobLine(const proto::ShardStatus& first,
                    const proto::ShardStatus* shard0, size_t num_servers) {
  std::string policy = first.policy();
  if (first.staleness_bound() >= 0) {
    absl::StrAppend(&policy, " (staleness ", first.staleness_bound(), ")");
  }
  if (first.backup_workers() > 0) {
    absl::StrAppend(&policy, " (backup workers ", first.backup_workers(), ", ",
                    first.late_pushes(), " late pushes dropped)");
  }
  std::string out = absl::StrFormat(
      "job %s   policy %s   %d shard(s)   lease %gs", first.job_id(), policy,
      num_servers, first.lease_seconds());
  if (shard0 != nullptr) {
    int done = 0;
    double accuracy = -1;
    for (const proto::EpochMetrics& e : shard0->epochs()) {
      if (e.complete()) {
        done = static_cast<int>(e.epoch());
        accuracy = e.test_accuracy();
      }
    }
    absl::StrAppendFormat(&out, "   epoch %d/%d", done, shard0->total_epochs());
    if (accuracy >= 0) {
      absl::StrAppendFormat(&out, "   last test accuracy %.4f", accuracy);
    }
  }
  return out + "\n\n";
}

std::string ShardLines(const std::vector<ServerStatus>& servers) {
  std::string out =
      absl::StrFormat("%-5s %-21s %-5s %6s %10s %8s %8s %9s %9s %9s %9s\n",
                      "SHARD", "ADDRESS", "STATE", "CHUNKS", "BYTES", "VERSION",
                      "PUSHES/S", "WAIT_P50", "WAIT_P99", "MB_IN", "MB_OUT");
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
  return out;
}

// Workers as `first` sees them; traffic summed over all shards.
std::string WorkerLines(const proto::ShardStatus& first,
                        const std::vector<ServerStatus>& servers) {
  std::string out =
      absl::StrFormat("\n%-5s %-9s %8s %7s %10s %8s %9s %9s %10s %9s\n", "RANK",
                      "STATE", "CLOCK", "BEHIND", "LAST_SEEN", "PUSHES",
                      "MB_SENT", "MB_RECV", "LAST_LOSS", "PROCESSES");
  for (int r = 0; r < first.workers_size(); ++r) {
    const proto::WorkerStatus& w = first.workers(r);
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
  return out;
}

std::string WaitingLines(const std::vector<ServerStatus>& servers) {
  std::string out;
  for (const ServerStatus& s : servers) {
    if (!s.status.ok()) continue;
    for (const proto::WaitingPull& p : s.status->waiting()) {
      if (out.empty()) out += "\nWAITING PULLS\n";
      absl::StrAppendFormat(
          &out, "  shard %d: %srank %d at clock %d, %.1fs: %s\n",
          s.status->shard(), p.stalled() ? "STALLED " : "", p.rank(), p.clock(),
          p.waited_seconds(), p.waiting_on());
      if (!p.stalled()) continue;
      // What each rank it waits for last did, as this shard saw it.
      for (uint32_t r : p.waits_for()) {
        if (r >= static_cast<uint32_t>(s.status->workers_size())) continue;
        const proto::WorkerStatus& w = s.status->workers(r);
        auto ago = [](double seconds) {
          return seconds < 0 ? std::string("never")
                             : absl::StrFormat("%.1fs ago", seconds);
        };
        absl::StrAppendFormat(
            &out,
            "    rank %d: %s, clock %d, last push %s, last heartbeat %s\n", r,
            w.state(), w.clock(), ago(w.last_push_seconds_ago()),
            ago(w.last_heartbeat_seconds_ago()));
      }
    }
  }
  return out;
}

// Each shard's newest checkpoint, and the one it started from.
std::string CheckpointLines(const std::vector<ServerStatus>& servers) {
  std::string out;
  for (const ServerStatus& s : servers) {
    if (!s.status.ok() || s.status->checkpoint_path().empty()) continue;
    const proto::ShardStatus& st = *s.status;
    if (out.empty()) out += "\nCHECKPOINTS\n";
    absl::StrAppendFormat(
        &out, "  shard %d: version %d, %.1fs ago, %s%s\n", st.shard(),
        st.checkpoint_version(), st.checkpoint_age_seconds(),
        st.checkpoint_path(),
        st.restored_from().empty()
            ? ""
            : absl::StrCat(" (started from ", st.restored_from(), ")"));
  }
  return out;
}

// "<= b": the smallest bucket bound holding `q` of the histogram's
// observations; "> b" past the last bound.
std::string Quantile(const proto::CountHistogram& h, double q) {
  const double target = q * static_cast<double>(h.count());
  const int n = std::min(h.upper_bounds_size(), h.cumulative_size());
  for (int i = 0; i < n; ++i) {
    if (static_cast<double>(h.cumulative(i)) >= target) {
      return absl::StrFormat("<= %g", h.upper_bounds(i));
    }
  }
  return n == 0 ? "?" : absl::StrFormat("> %g", h.upper_bounds(n - 1));
}

// Under async and ssp: the staleness of each shard's pushes.
std::string StalenessLines(const std::vector<ServerStatus>& servers) {
  std::string out;
  for (const ServerStatus& s : servers) {
    if (!s.status.ok() || s.status->staleness_scaling().empty()) continue;
    const proto::CountHistogram& h = s.status->push_staleness();
    if (h.count() == 0) continue;
    if (out.empty()) out += "\nPUSH STALENESS (versions since the pull)\n";
    absl::StrAppendFormat(
        &out,
        "  shard %d: mean %.2f over %d pushes, p50 %s, p99 %s, "
        "scaling %s\n",
        s.status->shard(), h.sum() / static_cast<double>(h.count()), h.count(),
        Quantile(h, 0.5), Quantile(h, 0.99), s.status->staleness_scaling());
    // By rank: a rank well above the others computes on older parameters.
    std::string ranks;
    for (const proto::WorkerStatus& w : s.status->workers()) {
      absl::StrAppendFormat(&ranks, "%s rank %d %.2f", ranks.empty() ? "" : ",",
                            w.rank(), w.mean_push_staleness());
    }
    absl::StrAppendFormat(&out, "    mean by rank:%s\n", ranks);
  }
  return out;
}

// Shards still waiting for their workers to declare the model.
std::string DeclarationLines(const std::vector<ServerStatus>& servers) {
  std::string out;
  for (const ServerStatus& s : servers) {
    if (!s.status.ok() || s.status->awaiting_declaration().empty()) continue;
    if (out.empty()) out += "\nAWAITING THE MODEL\n";
    absl::StrAppendFormat(&out, "  %s\n", s.status->awaiting_declaration());
  }
  return out;
}

// Pushes clipped and divergences, where there were any.
std::string GuardLines(const std::vector<ServerStatus>& servers) {
  std::string out;
  for (const ServerStatus& s : servers) {
    if (!s.status.ok()) continue;
    const proto::ShardStatus& st = *s.status;
    if (st.clipped_pushes() == 0 && st.divergences() == 0) continue;
    if (out.empty()) out += "\nGUARDS\n";
    std::string ranks;
    for (const proto::WorkerStatus& w : st.workers()) {
      if (w.divergences() == 0) continue;
      absl::StrAppendFormat(&ranks, "%s rank %d: %d (mean loss %.4g)",
                            ranks.empty() ? ";" : ",", w.rank(),
                            w.divergences(), w.mean_loss());
    }
    absl::StrAppendFormat(&out,
                          "  shard %d: %d push(es) clipped, %d "
                          "divergence(s)%s\n",
                          st.shard(), st.clipped_pushes(), st.divergences(),
                          ranks);
    if (!st.guard_stopped().empty()) {
      absl::StrAppendFormat(&out, "    STOPPED: %s\n", st.guard_stopped());
    }
  }
  return out;
}

// Each shard's rows of each embedding table.
std::string TableLines(const std::vector<ServerStatus>& servers) {
  std::string out;
  for (const ServerStatus& s : servers) {
    if (!s.status.ok()) continue;
    for (const proto::TableStatus& t : s.status->tables()) {
      if (out.empty()) {
        out = absl::StrFormat(
            "\n%-5s %-12s %-6s %12s %12s %10s %14s %14s %14s %12s %12s "
            "%10s\n",
            "SHARD", "TABLE", "POLICY", "ROWS", "MAX_ROWS", "MiB",
            "ROWS_PULLED", "ROWS_PUSHED", "NOT_ADMITTED", "EVICTED", "ON_DISK",
            "DISK_MiB");
      }
      absl::StrAppendFormat(
          &out,
          "%-5d %-12s %-6s %12d %12s %10.1f %14d %14d %14d %12d %12d "
          "%10.1f\n",
          s.status->shard(), t.name(), t.policy(), t.rows(),
          t.max_rows() == 0 ? std::string("-") : absl::StrCat(t.max_rows()),
          t.bytes() / 1048576.0, t.rows_pulled(), t.rows_pushed(),
          t.rows_not_admitted(), t.rows_evicted(), t.rows_on_disk(),
          t.disk_bytes() / 1048576.0);
    }
  }
  return out;
}

std::string EpochLines(const proto::ShardStatus& shard0) {
  if (shard0.epochs_size() == 0) return "";
  // A binary classifier's epochs also give AUC and log loss.
  bool scored = false;
  for (const proto::EpochMetrics& e : shard0.epochs()) {
    scored = scored || e.test_scored();
  }
  std::string out = absl::StrFormat(
      "\n%-6s %-9s %11s %10s%s %12s %8s\n", "EPOCH", "REPORTED", "TRAIN_LOSS",
      "TEST_ACC",
      scored ? absl::StrFormat(" %8s %9s", "TEST_AUC", "LOG_LOSS") : "",
      "SAMPLES/S", "DONE");
  for (const proto::EpochMetrics& e : shard0.epochs()) {
    std::string scores;
    if (scored && e.test_scored()) {
      scores = absl::StrFormat(" %8.4f %9.4f", e.test_auc(), e.test_log_loss());
    } else if (scored) {
      scores = absl::StrFormat(" %8s %9s", "-", "-");
    }
    absl::StrAppendFormat(
        &out, "%-6d %-9s %11.4f %10.4f%s %12.0f %8s\n", e.epoch(),
        absl::StrCat(e.workers_reported(), "/", shard0.workers_size()),
        e.train_loss(), e.test_accuracy(), scores, e.samples_per_second(),
        e.complete() ? "yes" : "no");
  }
  return out;
}

}  // namespace

std::string FormatStatusTable(const std::vector<ServerStatus>& servers) {
  const proto::ShardStatus* first = nullptr;
  const proto::ShardStatus* shard0 = nullptr;
  for (const ServerStatus& s : servers) {
    if (!s.status.ok()) continue;
    if (first == nullptr) first = &*s.status;
    if (s.status->shard() == 0) shard0 = &*s.status;
  }
  std::string out;
  if (first != nullptr) out += JobLine(*first, shard0, servers.size());
  out += ShardLines(servers);
  out += DeclarationLines(servers);
  if (first != nullptr) out += WorkerLines(*first, servers);
  out += WaitingLines(servers);
  out += CheckpointLines(servers);
  out += StalenessLines(servers);
  out += GuardLines(servers);
  out += TableLines(servers);
  if (shard0 != nullptr) out += EpochLines(*shard0);
  return out;
}

std::vector<ServerStatus> ServingReplicas(
    const std::vector<ServerStatus>& by_slot, int num_shards) {
  std::vector<ServerStatus> out(by_slot.begin(), by_slot.begin() + num_shards);
  for (size_t slot = num_shards; slot < by_slot.size(); ++slot) {
    const ServerStatus& s = by_slot[slot];
    if (s.status.ok() && s.status->replica().role() == "primary") {
      out[slot % num_shards] = s;
    }
  }
  return out;
}

std::string MemberLines(const std::vector<JobMember>& members) {
  std::string out = "\nMEMBERS (coordination.etcd)\n";
  if (members.empty()) return out + "  none registered\n";
  absl::StrAppendFormat(&out, "  %-7s %5s  %-22s %-16s %s\n", "KIND", "ID",
                        "ADDRESS", "HOST", "PID");
  for (const JobMember& m : members) {
    absl::StrAppendFormat(&out, "  %-7s %5d  %-22s %-16s %d\n", m.kind, m.id,
                          m.address, m.host, m.pid);
  }
  return out;
}

std::string ReplicaLines(const std::vector<ServerStatus>& by_slot,
                         int num_shards) {
  std::string out = "\nREPLICAS\n";
  for (size_t slot = 0; slot < by_slot.size(); ++slot) {
    const ServerStatus& s = by_slot[slot];
    absl::StrAppendFormat(&out, "  shard %d at %s: ", slot % num_shards,
                          s.address);
    if (!s.status.ok()) {
      absl::StrAppend(&out, "no answer (", s.status.status().message(), ")\n");
      continue;
    }
    const proto::ReplicaStatus& r = s.status->replica();
    absl::StrAppendFormat(&out, "%s, term %d", r.role(), r.term());
    if (r.role() == "primary") {
      absl::StrAppend(
          &out, r.peer_in_sync()
                    ? ", backup in sync"
                    : absl::StrCat(", backup NOT in sync (", r.lag_versions(),
                                   " version(s) behind)"));
    } else if (r.role() == "backup") {
      absl::StrAppendFormat(&out, ", holds version %d, primary heard %.1fs ago",
                            r.held_version(), r.peer_silent_seconds());
    }
    if (r.takeovers() > 0) {
      absl::StrAppendFormat(&out, ", %d take-over(s)", r.takeovers());
    }
    out += "\n";
  }
  return out;
}

std::string FormatStatusJson(
    const std::vector<ServerStatus>& servers,
    const absl::StatusOr<std::vector<JobMember>>* members) {
  std::string out = "{\"servers\": [";
  for (size_t i = 0; i < servers.size(); ++i) {
    const ServerStatus& s = servers[i];
    if (i > 0) out += ", ";
    absl::StrAppend(&out, "{\"address\": ", JsonQuote(s.address));
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
                      JsonQuote(std::string(s.status.status().message())), "}");
    }
  }
  out += "]";
  if (members != nullptr && !members->ok()) {
    absl::StrAppend(&out, ", \"members_error\": ",
                    JsonQuote(std::string(members->status().message())));
  } else if (members != nullptr) {
    out += ", \"members\": [";
    for (size_t i = 0; i < (*members)->size(); ++i) {
      const JobMember& m = (**members)[i];
      absl::StrAppend(
          &out, i > 0 ? ", " : "", "{\"kind\": ", JsonQuote(m.kind),
          ", \"id\": ", m.id, ", \"address\": ", JsonQuote(m.address),
          ", \"host\": ", JsonQuote(m.host), ", \"pid\": ", m.pid, "}");
    }
    out += "]";
  }
  return out + "}\n";
}

}  // namespace paramd
