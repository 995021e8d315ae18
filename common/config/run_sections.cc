// The job file's sections about running a job rather than training it:
// `limits`, `security`, `checkpoint`, `restart`, `metrics` and `compression`,
// read into their configs. Declared in common/config/job_sections.h, called
// by the job-file parser.

#include <arpa/inet.h>

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/config/job_sections.h"

namespace paramd {

absl::Status ParseLimitsSection(YamlReader& reader, const YAML::Node& l,
                                LimitsConfig* out) {
  LimitsConfig& lc = *out;
  RETURN_IF_ERROR(reader.Get(l, "limits", "max_inflight_per_worker", false,
                             &lc.max_inflight_per_worker));
  if (lc.max_inflight_per_worker < 2 || lc.max_inflight_per_worker > 1024) {
    return reader.Error(l["max_inflight_per_worker"],
                        "limits.max_inflight_per_worker",
                        "must be between 2 (a push and a pull) and 1024");
  }
  RETURN_IF_ERROR(reader.Get(l, "limits", "transport_memory_mb", false,
                             &lc.transport_memory_mb));
  if (lc.transport_memory_mb < 0 || lc.transport_memory_mb > (1 << 20)) {
    return reader.Error(l["transport_memory_mb"], "limits.transport_memory_mb",
                        "must be between 0 (automatic) and 1048576");
  }
  RETURN_IF_ERROR(
      reader.Get(l, "limits", "stream_window_kb", false, &lc.stream_window_kb));
  if (!LimitsConfig::ValidStreamWindow(lc.stream_window_kb)) {
    return reader.Error(l["stream_window_kb"], "limits.stream_window_kb",
                        "must be 0 (gRPC's adaptive windows) or between 64 "
                        "and 1048576 (KiB)");
  }
  return absl::OkStatus();
}

absl::Status ParseSecuritySection(YamlReader& reader, const YAML::Node& sec,
                                  const PathResolver& resolve,
                                  SecurityConfig* out) {
  SecurityConfig& sc = *out;
  for (auto [key, path] :
       {std::pair{"token_file", &sc.token_file},
        std::pair{"tls_cert", &sc.tls_cert}, std::pair{"tls_key", &sc.tls_key},
        std::pair{"tls_ca", &sc.tls_ca},
        std::pair{"tls_client_cert", &sc.tls_client_cert},
        std::pair{"tls_client_key", &sc.tls_client_key}}) {
    RETURN_IF_ERROR(reader.Get(sec, "security", key, false, path));
    *path = resolve(*path);
  }
  RETURN_IF_ERROR(
      reader.Get(sec, "security", "mutual_tls", false, &sc.mutual_tls));
  RETURN_IF_ERROR(reader.Get(sec, "security", "tls_server_name", false,
                             &sc.tls_server_name));
  if (sc.tls_cert.empty() != sc.tls_key.empty()) {
    const bool cert = !sc.tls_cert.empty();
    return reader.Error(sec[cert ? "tls_cert" : "tls_key"],
                        cert ? "security.tls_key" : "security.tls_cert",
                        "missing: tls_cert and tls_key come together");
  }
  if (!sc.tls()) {
    for (const char* key : {"tls_ca", "mutual_tls", "tls_client_cert",
                            "tls_client_key", "tls_server_name"}) {
      if (sec[key].IsDefined()) {
        return reader.Error(sec[key], absl::StrCat("security.", key),
                            "only applies with security.tls_cert and tls_key");
      }
    }
  }
  if (sc.tls_ca.empty()) sc.tls_ca = sc.tls_cert;
  if (sc.tls_client_cert.empty() != sc.tls_client_key.empty()) {
    const bool cert = !sc.tls_client_cert.empty();
    return reader.Error(
        sec[cert ? "tls_client_cert" : "tls_client_key"],
        cert ? "security.tls_client_key" : "security.tls_client_cert",
        "missing: tls_client_cert and tls_client_key come "
        "together");
  }
  if (!sc.mutual_tls && !sc.tls_client_cert.empty()) {
    return reader.Error(sec["tls_client_cert"], "security.tls_client_cert",
                        "only applies with security.mutual_tls: true");
  }
  if (sc.mutual_tls && sc.tls_client_cert.empty()) {
    sc.tls_client_cert = sc.tls_cert;
    sc.tls_client_key = sc.tls_key;
  }
  return absl::OkStatus();
}

absl::Status ParseCheckpointSection(YamlReader& reader, const YAML::Node& ck,
                                    const PathResolver& resolve,
                                    CheckpointConfig* out) {
  CheckpointConfig& cc = *out;
  RETURN_IF_ERROR(reader.Get(ck, "checkpoint", "enabled", false, &cc.enabled));
  RETURN_IF_ERROR(reader.Get(ck, "checkpoint", "dir", false, &cc.dir));
  if (!cc.enabled && !cc.dir.empty()) {
    return reader.Error(ck["dir"], "checkpoint.dir",
                        "names a folder while checkpoint.enabled is false");
  }
  cc.dir = resolve(cc.dir);
  RETURN_IF_ERROR(
      reader.Get(ck, "checkpoint", "every_steps", false, &cc.every_steps));
  if (cc.every_steps < 1) {
    return reader.Error(ck["every_steps"], "checkpoint.every_steps",
                        "must be >= 1");
  }
  RETURN_IF_ERROR(reader.Get(ck, "checkpoint", "keep", false, &cc.keep));
  if (cc.keep < 1 || cc.keep > 1000) {
    return reader.Error(ck["keep"], "checkpoint.keep",
                        "must be between 1 and 1000");
  }
  RETURN_IF_ERROR(
      reader.Get(ck, "checkpoint", "full_every", false, &cc.full_every));
  if (cc.full_every < 1 || cc.full_every > 1000000) {
    return reader.Error(ck["full_every"], "checkpoint.full_every",
                        "must be between 1 and 1000000");
  }
  if (!cc.enabled) {
    for (const char* key : {"every_steps", "keep", "full_every"}) {
      if (ck[key].IsDefined()) {
        return reader.Error(ck[key], absl::StrCat("checkpoint.", key),
                            "does not apply: checkpoint.enabled is false");
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParseReplicationSection(YamlReader& reader, const YAML::Node& r,
                                     const JobConfig& job,
                                     ReplicationConfig* out) {
  RETURN_IF_ERROR(reader.Get(r, "replication", "factor", false, &out->factor));
  if (out->factor < 1 || out->factor > 2) {
    return reader.Error(r["factor"], "replication.factor",
                        "must be 1 (no replicas) or 2 (a backup per shard)");
  }
  const YAML::Node backups = r["backups"];
  if (out->factor == 1) {
    if (backups.IsDefined()) {
      return reader.Error(backups, "replication.backups",
                          "does not apply: replication.factor is 1");
    }
    return absl::OkStatus();
  }
  if (job.servers_from_etcd) {
    return reader.Error(r["factor"], "replication.factor",
                        "2 is not supported yet with cluster.servers "
                        "{etcd: N}: list the servers and the backups");
  }
  if (job.servers_from_slurm) {
    // The backups' addresses come from the Slurm job as the servers' do
    // (common/launch/slurm.h), at the ports after the servers'.
    if (backups.IsDefined()) {
      return reader.Error(backups, "replication.backups",
                          "does not apply with cluster.servers {slurm: N}: "
                          "the backups are placed by the Slurm rule as the "
                          "servers are");
    }
    if (job.slurm_port != 0 &&
        job.slurm_port + 2 * job.num_shards() - 1 > 65535) {
      return reader.Error(r["factor"], "replication.factor",
                          absl::StrCat("cluster.servers.port ", job.slurm_port,
                                       " leaves no room for ", job.num_shards(),
                                       " backups after the servers' ports"));
    }
    out->backups.assign(job.num_shards(), "");
    return absl::OkStatus();
  }
  if (!backups.IsDefined() || !backups.IsSequence() ||
      static_cast<int>(backups.size()) != job.num_shards()) {
    return reader.Error(backups.IsDefined() ? backups : r["factor"],
                        "replication.backups",
                        absl::StrCat("expected a list of ", job.num_shards(),
                                     " \"host:port\" addresses, one per shard "
                                     "(where each shard's backup listens)"));
  }
  std::set<std::string> seen;
  for (const std::string& s : job.servers) seen.insert(s);
  for (size_t i = 0; i < backups.size(); ++i) {
    const std::string field = absl::StrCat("replication.backups[", i, "]");
    if (!backups[i].IsScalar()) {
      return reader.Error(backups[i], field, "expected \"host:port\"");
    }
    const std::string address = backups[i].Scalar();
    std::string host;
    int port = 0;
    if (absl::Status s = ParseHostPort(address, &host, &port); !s.ok()) {
      return reader.Error(backups[i], field, std::string(s.message()));
    }
    if (port != 0 && !seen.insert(address).second) {
      return reader.Error(
          backups[i], field,
          absl::StrCat("address '", address,
                       "' is listed twice among cluster.servers and "
                       "replication.backups"));
    }
    out->backups.push_back(address);
  }
  return absl::OkStatus();
}

absl::Status ParseRestartSection(YamlReader& reader, const YAML::Node& r,
                                 RestartConfig* out) {
  RETURN_IF_ERROR(reader.Get(r, "restart", "max", false, &out->max));
  if (out->max < 0 || out->max > 1000) {
    return reader.Error(r["max"], "restart.max", "must be between 0 and 1000");
  }
  RETURN_IF_ERROR(reader.Get(r, "restart", "backoff_seconds", false,
                             &out->backoff_seconds));
  if (!(out->backoff_seconds >= 0) || out->backoff_seconds > 3600) {
    return reader.Error(r["backoff_seconds"], "restart.backoff_seconds",
                        "must be between 0 and 3600");
  }
  return absl::OkStatus();
}

absl::Status ParseCoordinationSection(YamlReader& reader, const YAML::Node& c,
                                      const PathResolver& resolve,
                                      CoordinationConfig* out) {
  const YAML::Node etcd = c["etcd"];
  if (!etcd.IsDefined() || !etcd.IsSequence() || etcd.size() == 0) {
    return reader.Error(etcd.IsDefined() ? etcd : c, "coordination.etcd",
                        "expected a non-empty list of etcd client endpoints "
                        "(\"host:port\" or \"unix:PATH\")");
  }
  for (size_t i = 0; i < etcd.size(); ++i) {
    const std::string field = absl::StrCat("coordination.etcd[", i, "]");
    if (!etcd[i].IsScalar() || etcd[i].Scalar().empty()) {
      return reader.Error(etcd[i], field,
                          "expected \"host:port\" or \"unix:PATH\"");
    }
    const std::string endpoint = etcd[i].Scalar();
    if (absl::StartsWith(endpoint, "unix:")) {
      if (endpoint.size() == 5) {
        return reader.Error(etcd[i], field, "unix: names no socket");
      }
    } else {
      std::string host;
      int port = 0;
      if (absl::Status s = ParseHostPort(endpoint, &host, &port); !s.ok()) {
        return reader.Error(etcd[i], field, std::string(s.message()));
      }
      if (port == 0) {
        return reader.Error(etcd[i], field,
                            "an etcd endpoint needs its port (etcd's "
                            "default is 2379)");
      }
    }
    out->etcd.push_back(endpoint);
  }
  RETURN_IF_ERROR(reader.Get(c, "coordination", "lease_seconds", false,
                             &out->lease_seconds));
  if (out->lease_seconds < 2 || out->lease_seconds > 600) {
    return reader.Error(c["lease_seconds"], "coordination.lease_seconds",
                        "must be between 2 (etcd's shortest lease) and 600");
  }
  for (auto [key, path] : {std::pair{"tls_ca", &out->tls_ca},
                           std::pair{"tls_cert", &out->tls_cert},
                           std::pair{"tls_key", &out->tls_key},
                           std::pair{"password_file", &out->password_file}}) {
    RETURN_IF_ERROR(reader.Get(c, "coordination", key, false, path));
    *path = resolve(*path);
  }
  RETURN_IF_ERROR(reader.Get(c, "coordination", "user", false, &out->user));
  if (out->user.empty() != out->password_file.empty()) {
    const bool user = !out->user.empty();
    return reader.Error(
        c[user ? "user" : "password_file"],
        user ? "coordination.password_file" : "coordination.user",
        "missing: user and password_file come together (etcd's "
        "authentication)");
  }
  RETURN_IF_ERROR(reader.Get(c, "coordination", "tls_server_name", false,
                             &out->tls_server_name));
  if (!out->tls()) {
    for (const char* key : {"tls_cert", "tls_key", "tls_server_name"}) {
      if (c[key].IsDefined()) {
        return reader.Error(c[key], absl::StrCat("coordination.", key),
                            "only applies with coordination.tls_ca (TLS to "
                            "etcd)");
      }
    }
  }
  if (out->tls_cert.empty() != out->tls_key.empty()) {
    const bool cert = !out->tls_cert.empty();
    return reader.Error(c[cert ? "tls_cert" : "tls_key"],
                        cert ? "coordination.tls_key" : "coordination.tls_cert",
                        "missing: tls_cert and tls_key come together");
  }
  return absl::OkStatus();
}

absl::Status ParseCompressionSection(YamlReader& reader, const YAML::Node& c,
                                     CompressionConfig* out) {
  RETURN_IF_ERROR(reader.Get(c, "compression", "type", false, &out->type));
  if (out->type != "none" && out->type != "fp16" && out->type != "topk") {
    return reader.Error(
        c["type"], "compression.type",
        absl::StrCat("'", out->type, "' is not one of: none, fp16, topk"));
  }
  for (const char* key : {"ratio", "error_feedback", "momentum"}) {
    if (c[key] && !out->topk()) {
      return reader.Error(c[key], absl::StrCat("compression.", key),
                          "applies to type topk only");
    }
  }
  RETURN_IF_ERROR(reader.Get(c, "compression", "ratio", false, &out->ratio));
  if (!(out->ratio > 0 && out->ratio <= 1)) {
    return reader.Error(c["ratio"], "compression.ratio",
                        "must be in (0, 1]: the share of each chunk's "
                        "entries sent");
  }
  RETURN_IF_ERROR(reader.Get(c, "compression", "error_feedback", false,
                             &out->error_feedback));
  RETURN_IF_ERROR(
      reader.Get(c, "compression", "momentum", false, &out->momentum));
  if (!(out->momentum >= 0 && out->momentum < 1)) {
    return reader.Error(c["momentum"], "compression.momentum",
                        "must be in [0, 1)");
  }
  RETURN_IF_ERROR(reader.Get(c, "compression", "pull", false, &out->pull));
  if (out->pull != "float32" && out->pull != "fp16") {
    return reader.Error(
        c["pull"], "compression.pull",
        absl::StrCat("'", out->pull, "' is not one of: float32, fp16"));
  }
  return absl::OkStatus();
}

absl::Status ParseTracingSection(YamlReader& reader, const YAML::Node& t,
                                 const PathResolver& resolve,
                                 TracingConfig* out) {
  if (t.size() == 0) return absl::OkStatus();  // absent: off
  RETURN_IF_ERROR(reader.Get(t, "tracing", "dir", true, &out->dir));
  if (out->dir.empty()) {
    return reader.Error(t["dir"], "tracing.dir", "must not be empty");
  }
  out->dir = resolve(out->dir);
  RETURN_IF_ERROR(
      reader.Get(t, "tracing", "from_step", false, &out->from_step));
  if (out->from_step < 0) {
    return reader.Error(t["from_step"], "tracing.from_step", "must be >= 0");
  }
  RETURN_IF_ERROR(reader.Get(t, "tracing", "steps", false, &out->steps));
  if (out->steps < 1 || out->steps > TracingConfig::kMaxSteps) {
    return reader.Error(
        t["steps"], "tracing.steps",
        absl::StrCat("must be between 1 and ", TracingConfig::kMaxSteps));
  }
  return absl::OkStatus();
}

absl::Status ParseMetricsSection(YamlReader& reader, const YAML::Node& m,
                                 MetricsConfig* out) {
  RETURN_IF_ERROR(reader.Get(m, "metrics", "port", false, &out->port));
  if (out->port < 0 || out->port > 65535) {
    return reader.Error(m["port"], "metrics.port",
                        "must be between 0 (off) and 65535");
  }
  RETURN_IF_ERROR(reader.Get(m, "metrics", "bind", false, &out->bind));
  in_addr parsed;
  if (inet_pton(AF_INET, out->bind.c_str(), &parsed) != 1) {
    return reader.Error(m["bind"], "metrics.bind",
                        "must be an IPv4 address, e.g. 0.0.0.0 or 127.0.0.1 "
                        "(the metrics endpoint does not serve IPv6)");
  }
  return absl::OkStatus();
}

absl::Status ParseTestingSection(YamlReader& reader, const YAML::Node& t,
                                 int num_workers, TestingConfig* out) {
  RETURN_IF_ERROR(
      reader.Get(t, "testing", "slow_rank", false, &out->slow_rank));
  if (out->slow_rank < -1 || out->slow_rank >= num_workers) {
    return reader.Error(t["slow_rank"], "testing.slow_rank",
                        absl::StrCat("must be a rank in [0, ", num_workers,
                                     ") or -1 for none"));
  }
  RETURN_IF_ERROR(
      reader.Get(t, "testing", "slow_step_ms", false, &out->slow_step_ms));
  if (out->slow_step_ms < 0 || out->slow_step_ms > 60000) {
    return reader.Error(t["slow_step_ms"], "testing.slow_step_ms",
                        "must be between 0 and 60000");
  }
  RETURN_IF_ERROR(reader.Get(t, "testing", "drop_reply_probability", false,
                             &out->drop_reply_probability));
  if (!(out->drop_reply_probability >= 0 && out->drop_reply_probability <= 1)) {
    return reader.Error(t["drop_reply_probability"],
                        "testing.drop_reply_probability", "must be in [0, 1]");
  }
  RETURN_IF_ERROR(
      reader.Get(t, "testing", "delay_reply_ms", false, &out->delay_reply_ms));
  if (out->delay_reply_ms < 0 || out->delay_reply_ms > 60000) {
    return reader.Error(t["delay_reply_ms"], "testing.delay_reply_ms",
                        "must be between 0 and 60000");
  }
  if (t["link_mbps"]) {
    // Simulated in the server until real links could be made; a job file
    // that still says it is told where that went.
    return reader.Error(t["link_mbps"], "testing.link_mbps",
                        "is no longer a setting: shape real links between "
                        "simulated hosts instead (scripts/hosts.sh, "
                        "docs/operations.md, \"Across hosts on one machine\")");
  }
  return absl::OkStatus();
}

}  // namespace paramd
