// WireReader: protobuf's wire format read across the segments a message
// arrived in (the slices gRPC received), without joining them: varints,
// fixed fields, tags, skipped fields and groups, bytes copied out or seen in
// place. The hand-written decoders (common/wire/wire_format.h,
// common/wire/row_wire.h) walk their messages with it.
#ifndef PARAMD_COMMON_WIRE_WIRE_READER_H_
#define PARAMD_COMMON_WIRE_WIRE_READER_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace paramd {

// Reads protobuf wire format across a sequence of segments.
class WireReader {
 public:
  explicit WireReader(absl::Span<const absl::string_view> segments);

  uint64_t position() const { return position_; }
  uint64_t size() const { return size_; }
  bool ReadVarint(uint64_t* value);
  bool ReadFixed32(uint32_t* value);
  bool Skip(uint64_t n);
  bool CopyTo(char* out, uint64_t n);
  // The next `n` bytes when they lie within one segment (then consumed);
  // an empty view when not (nothing consumed).
  absl::string_view Contiguous(uint64_t n);
  // Reads a field's tag as protobuf does: at most 5 bytes, cut to 32 bits,
  // with a field number above 0 and a wire type in 0-5. An
  // end-group tag (type 4) is returned like any other; the caller decides.
  bool ReadTag(int* field, int* wire_type);
  // Skips one field's value of `wire_type` (a group up to its matching end
  // tag, nested at most 100 deep); false if malformed.
  bool SkipField(int field, int wire_type);

  // A place in the segments to come back to.
  struct Mark {
    size_t segment = 0, offset = 0;
    uint64_t position = 0;
  };
  Mark mark() const { return Mark{segment_, offset_, position_}; }
  void Restore(const Mark& m) {
    segment_ = m.segment;
    offset_ = m.offset;
    position_ = m.position;
  }

 private:
  bool SkipGroup(int field, int depth);
  void Settle();  // Moves past exhausted segments.

  absl::Span<const absl::string_view> segments_;
  size_t segment_ = 0;
  size_t offset_ = 0;  // Within segments_[segment_].
  uint64_t position_ = 0;
  uint64_t size_ = 0;
};

}  // namespace paramd

#endif  // PARAMD_COMMON_WIRE_WIRE_READER_H_
