// The job's security section (common/config/job_config.h) made into gRPC
// credentials: TLS for servers and channels, and the job token every call
// carries. Files are read once, by LoadSecurity, with errors naming the
// field and path.
#ifndef PARAMD_COMMON_RPC_CREDENTIALS_H_
#define PARAMD_COMMON_RPC_CREDENTIALS_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/config/job_config.h"

namespace paramd {

// The metadata key that carries the token: "authorization: Bearer <token>".
inline constexpr char kTokenMetadataKey[] = "authorization";

// The contents of the files a SecurityConfig names.
struct JobSecurity {
  std::string token;  // Empty: no token.
  bool tls = false;
  bool mutual_tls = false;
  std::string cert, key, ca, client_cert, client_key;
  std::string server_name;
};

absl::StatusOr<JobSecurity> LoadSecurity(const SecurityConfig& config);

// TLS (with the client certificate check under mutual TLS) or plain text.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(
    const JobSecurity& security);

// A channel to `address` speaking TLS when the job does, whose every call
// carries the job's token.
std::shared_ptr<grpc::Channel> CreateJobChannel(
    const std::string& address, const JobSecurity& security,
    grpc::ChannelArguments args = grpc::ChannelArguments());

// OK when the job has no token or the call carries it; otherwise
// UNAUTHENTICATED naming `rpc` (never the token).
grpc::Status CheckCallToken(const JobSecurity& security,
                            const grpc::ServerContextBase& context,
                            const char* rpc);

}  // namespace paramd

#endif  // PARAMD_COMMON_RPC_CREDENTIALS_H_
