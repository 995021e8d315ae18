#include "common/base/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace paramd {

absl::Status InitLogging(const std::string& process_name,
                         const std::string& level) {
  const spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  // from_str answers "off" for anything it does not know.
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_level: unknown level '", level,
                     "' (expected trace, debug, info, warn, error or off)"));
  }
  // Built directly rather than through spdlog's registry, so a second call
  // (as in tests) replaces the logger instead of failing on its name.
  auto logger = std::make_shared<spdlog::logger>(
      process_name, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("%H:%M:%S.%e %^%L%$ %v");
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return absl::OkStatus();
}

}  // namespace paramd
