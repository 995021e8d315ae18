#include "tests/trace_reader.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"

namespace paramd::testing {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

absl::StatusOr<double> Number(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  if (it == s.fields().end() || it->second.kind_case() != Value::kNumberValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("an event without a number '", key, "'"));
  }
  return it->second.number_value();
}

absl::StatusOr<std::string> Text(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  if (it == s.fields().end() || it->second.kind_case() != Value::kStringValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("an event without a string '", key, "'"));
  }
  return it->second.string_value();
}

}  // namespace

absl::StatusOr<TraceDocument> ReadTrace(const std::string& json) {
  Struct doc;
  if (!google::protobuf::util::JsonStringToMessage(json, &doc).ok()) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  auto list = doc.fields().find("traceEvents");
  if (list == doc.fields().end() ||
      list->second.kind_case() != Value::kListValue) {
    return absl::InvalidArgumentError("no traceEvents list");
  }
  TraceDocument out;
  for (const Value& v : list->second.list_value().values()) {
    if (v.kind_case() != Value::kStructValue) {
      return absl::InvalidArgumentError("an event that is not an object");
    }
    const Struct& e = v.struct_value();
    absl::StatusOr<std::string> ph = Text(e, "ph");
    absl::StatusOr<std::string> name = Text(e, "name");
    absl::StatusOr<double> pid = Number(e, "pid");
    absl::StatusOr<double> tid = Number(e, "tid");
    if (!ph.ok() || !name.ok() || !pid.ok() || !tid.ok()) {
      return absl::InvalidArgumentError("an event without ph, name, pid, tid");
    }
    auto args = e.fields().find("args");
    if (args == e.fields().end() ||
        args->second.kind_case() != Value::kStructValue) {
      return absl::InvalidArgumentError(
          absl::StrCat("event ", *name, " has no args object"));
    }
    const Struct& a = args->second.struct_value();
    if (*ph == "M") {
      if (*name == "process_name") {
        absl::StatusOr<std::string> process = Text(a, "name");
        if (!process.ok()) return process.status();
        out.processes[static_cast<int>(*pid)] = *process;
      }
      continue;
    }
    if (*ph != "X") {
      return absl::InvalidArgumentError(
          absl::StrCat("event ", *name, " has phase ", *ph));
    }
    TraceEvent x;
    x.name = *name;
    x.pid = static_cast<int>(*pid);
    x.tid = static_cast<int>(*tid);
    absl::StatusOr<double> ts = Number(e, "ts");
    absl::StatusOr<double> dur = Number(e, "dur");
    absl::StatusOr<double> clock = Number(a, "clock");
    if (!ts.ok() || !dur.ok() || !clock.ok() || *dur < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("event ", *name, ": no ts, dur >= 0 or args.clock"));
    }
    x.ts = *ts;
    x.dur = *dur;
    x.clock = static_cast<int64_t>(*clock);
    if (absl::StatusOr<double> rank = Number(a, "rank"); rank.ok()) {
      x.rank = static_cast<int>(*rank);
    }
    out.events.push_back(x);
  }
  return out;
}

}  // namespace paramd::testing
