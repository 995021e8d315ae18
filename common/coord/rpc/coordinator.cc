#include "common/coord/rpc/coordinator.h"

#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace paramd {
namespace {

// The file at `path` (named `field` in errors).
absl::StatusOr<std::string> ReadText(const std::string& field,
                                     const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": cannot read ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The file at `path` (named `field` in errors), which must be PEM text.
absl::StatusOr<std::string> ReadPem(const std::string& field,
                                    const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadText(field, path));
  if (text.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", path, " holds no PEM block"));
  }
  return text;
}

// The password in `path`: its first line.
absl::StatusOr<std::string> ReadPassword(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text,
                   ReadText("coordination.password_file", path));
  text = text.substr(0, text.find('\n'));
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordination.password_file: ", path, " is empty"));
  }
  return text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> ConnectCoordinator(
    const CoordinationConfig& coordination) {
  EtcdClient::Options options;
  options.timeout =
      std::min(absl::Seconds(5), absl::Seconds(coordination.lease_seconds) / 3);
  if (coordination.tls()) {
    grpc::SslCredentialsOptions ssl;
    ASSIGN_OR_RETURN(ssl.pem_root_certs,
                     ReadPem("coordination.tls_ca", coordination.tls_ca));
    if (!coordination.tls_cert.empty()) {
      ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                       ReadPem("coordination.tls_cert", coordination.tls_cert));
      ASSIGN_OR_RETURN(ssl.pem_private_key,
                       ReadPem("coordination.tls_key", coordination.tls_key));
    }
    options.credentials = grpc::SslCredentials(ssl);
    options.server_name = coordination.tls_server_name;
  }
  if (!coordination.user.empty()) {
    options.user = coordination.user;
    ASSIGN_OR_RETURN(options.password,
                     ReadPassword(coordination.password_file));
  }
  absl::StatusOr<std::unique_ptr<EtcdClient>> client =
      EtcdClient::Connect(coordination.etcd, options);
  if (!client.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordination.etcd: ", client.status().message()));
  }
  return client;
}

}  // namespace paramd
