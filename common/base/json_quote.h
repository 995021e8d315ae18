// JSON string literals for text paramd writes as JSON by hand (the step
// timeline, paramctl's status JSON).
#ifndef PARAMD_COMMON_BASE_JSON_QUOTE_H_
#define PARAMD_COMMON_BASE_JSON_QUOTE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace paramd {

// `text` as a JSON string literal, quotes included: quotes and
// backslashes escaped, control bytes as \u00XX; other bytes as they are.
std::string JsonQuote(absl::string_view text);

}  // namespace paramd

#endif  // PARAMD_COMMON_BASE_JSON_QUOTE_H_
