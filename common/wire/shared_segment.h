// SharedSegment: a same-host StepStream's shared memory (proto/paramd.proto,
// PushRequest.segment). A worker whose server runs on its own host puts a
// step's chunk bytes in a file both processes map, instead of through the
// socket: the push area, which the worker writes before it sends a push
// and the server reads while it applies it, and the pull area, which the
// server writes before it sends the reply and the worker reads once the
// reply is there. The messages themselves still go over gRPC and carry
// every field but the bytes (each chunk's place in the segment), so every
// check, clock, lease and refusal is as over the wire, and the socket's
// ordering orders the areas' use: neither side touches an area while the
// other may.
//
// The file is the worker's: created under /dev/shm (mode 0600) as
// "paramd-<pid>-<16 hex digits>", a header then the two areas, one per
// stream (a new stream, a new segment: a stale reply of an ended stream
// can write only into a segment nobody reads), and removed with it; a
// worker that died leaves its files, which the next worker to create one
// on the host removes. The server maps a name only of that form, a
// regular file of its own user, whose header is consistent with its size.
//
// Plain C++ (no gRPC): both sides' rpc layers use it.
#ifndef PARAMD_COMMON_WIRE_SHARED_SEGMENT_H_
#define PARAMD_COMMON_WIRE_SHARED_SEGMENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace paramd {

class SharedSegment {
 public:
  // The worker's: a new segment with areas of these sizes (each rounded up
  // to 64 bytes). Fails (e.g. no /dev/shm) with the reason.
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Create(
      size_t push_bytes, size_t pull_bytes);
  // The server's: maps the segment `name` a worker created. FailedPrecondition
  // naming the segment when it cannot be used (not there: another host;
  // another user's; not a segment).
  static absl::StatusOr<std::unique_ptr<SharedSegment>> Attach(
      absl::string_view name);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  const std::string& name() const { return name_; }
  absl::Span<char> push_area() const { return push_; }
  absl::Span<char> pull_area() const { return pull_; }

  // Where segments live (/dev/shm).
  static const char* Directory();

 private:
  SharedSegment(std::string name, char* base, size_t size, bool owner);

  const std::string name_;
  char* const base_;
  const size_t size_;
  const bool owner_;  // The creator removes the file.
  absl::Span<char> push_, pull_;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_WIRE_SHARED_SEGMENT_H_
