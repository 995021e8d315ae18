// Slurm's host lists and the placement rule of common/launch/slurm.h.
#include "common/launch/slurm.h"

#include <catch2/catch.hpp>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "common/config/job_file.h"
#include "tests/test_files.h"

namespace paramd {
namespace {

using Hosts = std::vector<std::string>;

TEST_CASE("host lists expand like scontrol show hostnames", "[slurm]") {
  CHECK(*ExpandHostList("vm") == Hosts{"vm"});
  CHECK(*ExpandHostList("n[1-3]") == Hosts{"n1", "n2", "n3"});
  CHECK(*ExpandHostList("n[08-10,15],gpu7") ==
        Hosts{"n08", "n09", "n10", "n15", "gpu7"});
  CHECK(*ExpandHostList("rack[1-2]-n[1-2]") ==
        Hosts{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"});
  CHECK(*ExpandHostList("a[1]x,b") == Hosts{"a1x", "b"});
}

TEST_CASE("bad host lists are refused with the fault named", "[slurm]") {
  for (const char* bad : {"n[1-3", "n1-3]", "n[3-1]", "n[a-b]", "n[]", "a,,b",
                          "", "n[1-2000000000]", "n[-1]"}) {
    absl::StatusOr<Hosts> hosts = ExpandHostList(bad);
    INFO(bad);
    REQUIRE_FALSE(hosts.ok());
    CHECK(hosts.status().message().find("host list") != std::string::npos);
  }
}

// A job of `servers` servers from Slurm.
JobConfig SlurmJob(int servers, int port) {
  JobConfig config;
  config.servers_from_slurm = true;
  config.servers.assign(servers, "");
  config.slurm_port = port;
  return config;
}

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("servers fill nodes in blocks; ports count up from the base",
          "[slurm]") {
  // 3 servers on 2 nodes: 2 per node.
  JobConfig config = SlurmJob(3, 47400);
  REQUIRE(ResolveSlurmServers(&config, Env({{"SLURM_JOB_ID", "12"},
                                            {"SLURM_JOB_NODELIST", "n[1-2]"}}))
              .ok());
  CHECK(config.servers == Hosts{"n1:47400", "n1:47401", "n2:47402"});
  // More nodes than servers: one each, on the first nodes.
  config = SlurmJob(2, 0);
  REQUIRE(ResolveSlurmServers(&config, Env({{"SLURM_JOB_ID", "4321"},
                                            {"SLURM_JOB_NODELIST", "a,b,c"}}))
              .ok());
  const int base = BasePortForJob(4321);
  CHECK(base == 20000 + 321 * 16);
  CHECK(config.servers ==
        Hosts{"a:" + std::to_string(base), "b:" + std::to_string(base + 1)});
  CHECK(ServersPerNode(3, 2) == 2);
  CHECK(ServersPerNode(2, 5) == 1);
  CHECK(ServersPerNode(8, 4) == 2);
}

TEST_CASE(
    "with replicas each backup goes on the next server node, its "
    "ports after the servers'",
    "[slurm][replication]") {
  // 3 servers on 2 nodes (2 per node): backups of shards 0 and 1 on n2,
  // of shard 2 on n1 (wrapping).
  JobConfig config = SlurmJob(3, 47400);
  config.replication.factor = 2;
  config.replication.backups.assign(3, "");
  const EnvLookup env =
      Env({{"SLURM_JOB_ID", "12"}, {"SLURM_JOB_NODELIST", "n[1-2]"}});
  REQUIRE(ResolveSlurmServers(&config, env).ok());
  CHECK(config.servers == Hosts{"n1:47400", "n1:47401", "n2:47402"});
  CHECK(config.replication.backups ==
        Hosts{"n2:47403", "n2:47404", "n1:47405"});
  // One node: the backups share it, on ports of their own.
  config = SlurmJob(2, 47400);
  config.replication.factor = 2;
  REQUIRE(ResolveSlurmServers(&config, Env({{"SLURM_JOB_ID", "12"},
                                            {"SLURM_JOB_NODELIST", "a"}}))
              .ok());
  CHECK(config.replication.backups == Hosts{"a:47402", "a:47403"});
  // More nodes than servers: a server per node, each backup on the next.
  CHECK(BackupNode(0, 3, 1) == 1);
  CHECK(BackupNode(1, 3, 1) == 2);
  CHECK(BackupNode(2, 3, 1) == 0);
  CHECK(BackupNode(0, 1, 1) == 0);
  // Without replicas nothing is filled.
  config = SlurmJob(2, 47400);
  REQUIRE(ResolveSlurmServers(&config, env).ok());
  CHECK(config.replication.backups.empty());
}

TEST_CASE("the job id picks distinct bases that leave room for servers",
          "[slurm]") {
  CHECK(BasePortForJob(1) != BasePortForJob(2));
  CHECK(BasePortForJob(2) - BasePortForJob(1) == 16);
  for (uint64_t id : {0ull, 1999ull, 123456789ull}) {
    CHECK(BasePortForJob(id) >= 20000);
    CHECK(BasePortForJob(id) + 1024 <= 65535);
  }
}

TEST_CASE("outside a Slurm job the addresses cannot be resolved", "[slurm]") {
  JobConfig config = SlurmJob(2, 0);
  absl::Status s = ResolveSlurmServers(&config, Env({}));
  CHECK(absl::IsFailedPrecondition(s));
  CHECK(s.message().find("SLURM_JOB_ID") != std::string::npos);
  s = ResolveSlurmServers(
      &config, Env({{"SLURM_JOB_ID", "x1"}, {"SLURM_JOB_NODELIST", "n1"}}));
  CHECK(s.message().find("SLURM_JOB_ID") != std::string::npos);
  s = ResolveSlurmServers(&config, Env({{"SLURM_JOB_ID", "1"}}));
  CHECK(s.message().find("SLURM_JOB_NODELIST") != std::string::npos);
  // A job with a list of servers is left alone.
  JobConfig listed;
  listed.servers = {"h:1"};
  CHECK(ResolveSlurmServers(&listed, Env({})).ok());
  CHECK(listed.servers == Hosts{"h:1"});
}

TEST_CASE("the job file's cluster.servers may say slurm", "[slurm][config]") {
  const std::string dir = testing::NewTempDir();
  testing::JobOptions o;
  std::string yaml = testing::JobYaml(o);
  const std::string list = "servers: [\"127.0.0.1:0\", \"127.0.0.1:0\"]";
  const size_t at = yaml.find(list);
  REQUIRE(at != std::string::npos);
  yaml.replace(at, list.size(), "servers: {slurm: 3, port: 47400}");
  absl::StatusOr<JobConfig> config =
      LoadJobConfig(testing::WriteFile(dir + "/job.yaml", yaml));
  REQUIRE(config.ok());
  CHECK(config->servers_from_slurm);
  CHECK(config->num_shards() == 3);
  CHECK(config->slurm_port == 47400);
  for (const auto& [servers, field] :
       std::vector<std::pair<std::string, std::string>>{
           {"{slurm: 0}", "cluster.servers.slurm"},
           {"{slurm: 2, port: 65535}", "cluster.servers.port"},
           {"{slurm: 2, bogus: 1}", "bogus"},
           {"{port: 5}", "cluster.servers.slurm"}}) {
    std::string bad = testing::JobYaml(o);
    bad.replace(bad.find(list), list.size(), "servers: " + servers);
    absl::StatusOr<JobConfig> c =
        LoadJobConfig(testing::WriteFile(dir + "/bad.yaml", bad));
    INFO(servers);
    REQUIRE_FALSE(c.ok());
    CHECK(c.status().message().find(field) != std::string::npos);
  }
  // Replicas: placed by the rule, so no backups list; ports for both.
  std::string replicated = yaml + "replication:\n  factor: 2\n";
  config = LoadJobConfig(testing::WriteFile(dir + "/r.yaml", replicated));
  REQUIRE(config.ok());
  CHECK(config->replication.enabled());
  CHECK(config->replication.backups.size() == 3);
  for (const auto& [text, field, why] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {yaml + "replication:\n  factor: 2\n  backups: [\"h:1\", "
                   "\"h:2\", \"h:3\"]\n",
            "replication.backups", "placed by the Slurm rule"},
           {absl::StrReplaceAll(yaml, {{"port: 47400", "port: 65533"}}) +
                "replication:\n  factor: 2\n",
            "replication.factor", "leaves no room for 3 backups"}}) {
    absl::StatusOr<JobConfig> c =
        LoadJobConfig(testing::WriteFile(dir + "/bad.yaml", text));
    INFO(text);
    REQUIRE_FALSE(c.ok());
    CHECK(absl::StrContains(c.status().message(), field));
    CHECK(absl::StrContains(c.status().message(), why));
  }
}

}  // namespace
}  // namespace paramd
