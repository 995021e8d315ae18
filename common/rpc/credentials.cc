#include "common/rpc/credentials.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/client_interceptor.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/job_token.h"
#include "common/base/status_macros.h"
#include "common/rpc/grpc_status.h"

namespace paramd {
namespace {

// The PEM file `path` of field security.`field`.
absl::StatusOr<std::string> ReadPem(const char* field,
                                    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    return absl::NotFoundError(absl::StrCat(
        "security.", field, ": cannot read '", path,
        "' (paramctl run --make-secrets writes one for a local job)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat("security.", field, ": '", path, "' holds no PEM block"));
  }
  return text.str();
}

// Adds the token to every call of a channel.
class TokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* value) : value_(value) {}
  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kTokenMetadataKey, *value_);
    }
    methods->Proceed();
  }

 private:
  const std::string* value_;
};

class TokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token)
      : value_(absl::StrCat("Bearer ", token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&value_);
  }

 private:
  const std::string value_;
};

}  // namespace

absl::StatusOr<JobSecurity> LoadSecurity(const SecurityConfig& config) {
  JobSecurity s;
  if (!config.token_file.empty()) {
    ASSIGN_OR_RETURN(s.token, ReadJobToken(config.token_file));
  }
  if (!config.tls()) return s;
  s.tls = true;
  s.mutual_tls = config.mutual_tls;
  s.server_name = config.tls_server_name;
  ASSIGN_OR_RETURN(s.cert, ReadPem("tls_cert", config.tls_cert));
  ASSIGN_OR_RETURN(s.key, ReadPem("tls_key", config.tls_key));
  ASSIGN_OR_RETURN(s.ca, ReadPem("tls_ca", config.tls_ca));
  if (config.mutual_tls) {
    ASSIGN_OR_RETURN(s.client_cert,
                     ReadPem("tls_client_cert", config.tls_client_cert));
    ASSIGN_OR_RETURN(s.client_key,
                     ReadPem("tls_client_key", config.tls_client_key));
  }
  return s;
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const JobSecurity& security) {
  if (!security.tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      security.mutual_tls
          ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
          : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  if (security.mutual_tls) options.pem_root_certs = security.ca;
  options.pem_key_cert_pairs.push_back({security.key, security.cert});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::Channel> CreateJobChannel(const std::string& address,
                                                const JobSecurity& security,
                                                grpc::ChannelArguments args) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (security.tls) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = security.ca;
    if (security.mutual_tls) {
      options.pem_private_key = security.client_key;
      options.pem_cert_chain = security.client_cert;
    }
    credentials = grpc::SslCredentials(options);
    if (!security.server_name.empty()) {
      args.SetSslTargetNameOverride(security.server_name);
    }
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  if (security.token.empty()) {
    return grpc::CreateCustomChannel(address, credentials, args);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<TokenInterceptorFactory>(security.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, credentials, args, std::move(interceptors));
}

grpc::Status CheckCallToken(const JobSecurity& security,
                            const grpc::ServerContextBase& context,
                            const char* rpc) {
  if (security.token.empty()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find(kTokenMetadataKey);
  if (it == metadata.end()) {
    return ToGrpcStatus(absl::UnauthenticatedError(
        absl::StrCat(rpc,
                     ": no job token (this job's servers require "
                     "'authorization: Bearer <token>' metadata with the "
                     "token of security.token_file)")));
  }
  constexpr absl::string_view kBearer = "Bearer ";
  const absl::string_view value(it->second.data(), it->second.size());
  if (!absl::StartsWith(value, kBearer) ||
      !JobTokensEqual(security.token, value.substr(kBearer.size()))) {
    return ToGrpcStatus(absl::UnauthenticatedError(absl::StrCat(
        rpc, ": wrong job token (not this job's security.token_file)")));
  }
  return grpc::Status::OK;
}

}  // namespace paramd
