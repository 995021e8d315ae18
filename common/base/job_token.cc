#include "common/base/job_token.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace paramd {

absl::StatusOr<std::string> ReadJobToken(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    return absl::NotFoundError(absl::StrCat(
        "security.token_file: cannot read '", path,
        "' (paramctl run --make-secrets writes one for a local job)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string token(absl::StripTrailingAsciiWhitespace(text.str()));
  if (token.size() < kMinTokenLength || token.size() > kMaxTokenLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "security.token_file: '", path, "' holds a token of ", token.size(),
        " characters; expected ", kMinTokenLength, " to ", kMaxTokenLength));
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          "security.token_file: '", path,
          "' holds a character that is not printable non-space ASCII"));
    }
  }
  return token;
}

bool JobTokensEqual(absl::string_view expected, absl::string_view given) {
  // Every byte of `expected` is compared whatever `given` holds; a length
  // difference counts without an early return.
  volatile unsigned char diff = expected.size() != given.size() ? 1 : 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char g =
        i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = diff | (static_cast<unsigned char>(expected[i]) ^ g);
  }
  return diff == 0 && !expected.empty();
}

absl::StatusOr<std::string> GenerateJobToken() {
  std::ifstream random("/dev/urandom", std::ios::binary);
  char bytes[32];
  if (!random.read(bytes, sizeof(bytes))) {
    return absl::UnavailableError("cannot read /dev/urandom for a job token");
  }
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

}  // namespace paramd
