#include "tools/ctl/local_secrets.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/base/job_token.h"
#include "common/base/status_macros.h"

namespace paramd {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

absl::Status MakeParentDir(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(),
                                      error);
  if (error) {
    return absl::UnavailableError(absl::StrCat("cannot create the folder of '",
                                               path, "': ", error.message()));
  }
  return absl::OkStatus();
}

absl::Status WriteToken(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string token, GenerateJobToken());
  RETURN_IF_ERROR(MakeParentDir(path));
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("security.token_file: cannot create '", path, "'"));
  }
  const std::string line = token + "\n";
  const bool ok =
      write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!ok) {
    return absl::UnavailableError(
        absl::StrCat("security.token_file: cannot write '", path, "'"));
  }
  return absl::OkStatus();
}

std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

// The names the certificate is valid for: localhost, loopback and every
// server host.
std::string SubjectAltNames(const JobConfig& config) {
  std::set<std::string> names = {"DNS:localhost", "IP:127.0.0.1", "IP:::1"};
  for (const std::string& server : config.servers) {
    std::string host = server.substr(0, server.rfind(':'));
    if (host.size() >= 2 && host.front() == '[') {
      host = host.substr(1, host.size() - 2);
    }
    if (host.empty()) continue;
    const bool ip = host.find_first_not_of("0123456789.:abcdefABCDEF") ==
                        std::string::npos &&
                    (host.find('.') != std::string::npos ||
                     host.find(':') != std::string::npos);
    names.insert(absl::StrCat(ip ? "IP:" : "DNS:", host));
  }
  if (!config.security.tls_server_name.empty()) {
    names.insert(absl::StrCat("DNS:", config.security.tls_server_name));
  }
  return absl::StrJoin(names, ",");
}

absl::Status WriteCertificate(const JobConfig& config) {
  const SecurityConfig& s = config.security;
  RETURN_IF_ERROR(MakeParentDir(s.tls_cert));
  RETURN_IF_ERROR(MakeParentDir(s.tls_key));
  const std::string command = absl::StrCat(
      "umask 077 && openssl req -x509 -newkey ec -pkeyopt "
      "ec_paramgen_curve:prime256v1 -nodes -days 30 -keyout ",
      ShellQuote(s.tls_key), " -out ", ShellQuote(s.tls_cert), " -subj ",
      ShellQuote(absl::StrCat("/CN=paramd job ", config.job_id)), " -addext ",
      ShellQuote("subjectAltName=" + SubjectAltNames(config)),
      " >/dev/null 2>&1");
  if (std::system(command.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("security.tls_cert: openssl could not make a self-signed "
                     "certificate at '",
                     s.tls_cert, "' (is openssl installed?)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> MakeLocalSecrets(
    const JobConfig& config) {
  const SecurityConfig& s = config.security;
  std::vector<std::string> said;
  if (!s.token_file.empty()) {
    if (Exists(s.token_file)) {
      said.push_back(absl::StrCat("job token: keeping ", s.token_file));
    } else {
      RETURN_IF_ERROR(WriteToken(s.token_file));
      said.push_back(absl::StrCat("job token: wrote ", s.token_file));
    }
  }
  if (s.tls()) {
    const bool cert = Exists(s.tls_cert), key = Exists(s.tls_key);
    if (cert && key) {
      said.push_back(absl::StrCat("TLS: keeping ", s.tls_cert));
    } else if (cert || key) {
      return absl::FailedPreconditionError(absl::StrCat(
          "security.", cert ? "tls_key" : "tls_cert", ": '",
          cert ? s.tls_key : s.tls_cert, "' is missing while '",
          cert ? s.tls_cert : s.tls_key, "' exists; remove it or supply both"));
    } else if (s.tls_ca != s.tls_cert) {
      return absl::FailedPreconditionError(
          "security.tls_ca: names a CA of its own; --make-secrets only makes "
          "a self-signed certificate (leave tls_ca out)");
    } else {
      RETURN_IF_ERROR(WriteCertificate(config));
      said.push_back(absl::StrCat("TLS: wrote a self-signed certificate ",
                                  s.tls_cert, " for ",
                                  SubjectAltNames(config)));
    }
  }
  if (said.empty()) {
    return absl::FailedPreconditionError(
        "--make-secrets: the job file has no security section to make "
        "secrets for");
  }
  return said;
}

}  // namespace paramd
