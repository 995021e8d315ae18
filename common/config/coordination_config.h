// The `coordination` section of a job file (common/config/job_config.h).
#ifndef PARAMD_COMMON_CONFIG_COORDINATION_CONFIG_H_
#define PARAMD_COMMON_CONFIG_COORDINATION_CONFIG_H_

#include <string>
#include <vector>

namespace paramd {

// The job's coordinator (`coordination`; docs/operations.md, "Coordination
// on etcd"): an etcd cluster under whose prefix /paramd/JOB/members/ every
// server and worker of the job registers itself with a lease, so that
// `paramctl status` lists who is in the job from one place, and which
// fences each replicated shard's primary (/paramd/JOB/shards/K/).
struct CoordinationConfig {
  // Its members' client endpoints: "host:port" or "unix:PATH".
  std::vector<std::string> etcd;
  // The lease of each registration: a process that dies is gone from the
  // list after at most this long (etcd grants at least 2 s).
  int lease_seconds = 10;
  // TLS to etcd (paths absolute after loading): the CA bundle etcd's
  // certificate is checked against (set: every call is TLS); a client
  // certificate and key for an etcd that asks for one (--client-cert-auth);
  // the name expected in etcd's certificate (default: each endpoint's
  // host, "localhost" for a unix socket).
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_server_name;
  // etcd's authentication (an etcd with `auth enable`): the user every
  // call is made as, and the file holding its password (path absolute
  // after loading; read when a process connects, its trailing newline
  // dropped). Both or neither.
  std::string user;
  std::string password_file;
  bool enabled() const { return !etcd.empty(); }
  bool tls() const { return !tls_ca.empty(); }
};

}  // namespace paramd

#endif  // PARAMD_COMMON_CONFIG_COORDINATION_CONFIG_H_
