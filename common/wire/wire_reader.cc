#include "common/wire/wire_reader.h"

#include <algorithm>
#include <cstring>

#include "common/wire/wire_primitives.h"

namespace paramd {

using wire::kFixed32;
using wire::kFixed64;
using wire::kLengthDelimited;
using wire::kVarint;

WireReader::WireReader(absl::Span<const absl::string_view> segments)
    : segments_(segments) {
  for (absl::string_view s : segments_) size_ += s.size();
  Settle();
}

void WireReader::Settle() {
  while (segment_ < segments_.size() && offset_ == segments_[segment_].size()) {
    ++segment_;
    offset_ = 0;
  }
}

bool WireReader::ReadVarint(uint64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (segment_ >= segments_.size()) return false;
    const uint8_t byte = static_cast<uint8_t>(segments_[segment_][offset_]);
    ++offset_;
    ++position_;
    Settle();
    v |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *value = v;
      return true;
    }
  }
  return false;  // More than 10 bytes.
}

bool WireReader::ReadFixed32(uint32_t* value) {
  unsigned char b[4];
  if (!CopyTo(reinterpret_cast<char*>(b), 4)) return false;
  *value = static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) |
           (static_cast<uint32_t>(b[2]) << 16) |
           (static_cast<uint32_t>(b[3]) << 24);
  return true;
}

bool WireReader::Skip(uint64_t n) {
  if (n > size_ - position_) return false;
  while (n > 0) {
    const size_t take =
        std::min<uint64_t>(n, segments_[segment_].size() - offset_);
    offset_ += take;
    position_ += take;
    n -= take;
    Settle();
  }
  return true;
}

bool WireReader::CopyTo(char* out, uint64_t n) {
  if (n > size_ - position_) return false;
  while (n > 0) {
    const size_t take =
        std::min<uint64_t>(n, segments_[segment_].size() - offset_);
    std::memcpy(out, segments_[segment_].data() + offset_, take);
    out += take;
    offset_ += take;
    position_ += take;
    n -= take;
    Settle();
  }
  return true;
}

absl::string_view WireReader::Contiguous(uint64_t n) {
  if (n == 0 || segment_ >= segments_.size() ||
      segments_[segment_].size() - offset_ < n) {
    return absl::string_view();
  }
  absl::string_view out = segments_[segment_].substr(offset_, n);
  offset_ += n;
  position_ += n;
  Settle();
  return out;
}

bool WireReader::ReadTag(int* field, int* wire_type) {
  uint64_t value = 0;
  const uint64_t start = position_;
  if (!ReadVarint(&value) || position_ - start > 5) return false;
  const uint32_t tag = static_cast<uint32_t>(value);  // as protobuf: cut
  *field = static_cast<int>(tag >> 3);
  *wire_type = static_cast<int>(tag & 7);
  return *field != 0 && *wire_type <= 5;
}

bool WireReader::SkipGroup(int field, int depth) {
  if (depth > 100) return false;
  while (true) {
    int f = 0, type = 0;
    if (!ReadTag(&f, &type)) return false;
    if (type == 4) return f == field;
    if (type == 3) {
      if (!SkipGroup(f, depth + 1)) return false;
    } else if (!SkipField(f, type)) {
      return false;
    }
  }
}

bool WireReader::SkipField(int field, int wire_type) {
  uint64_t v = 0;
  switch (wire_type) {
    case kVarint:
      return ReadVarint(&v);
    case kFixed64:
      return Skip(8);
    case kLengthDelimited:
      return ReadVarint(&v) && Skip(v);
    case 3:
      return SkipGroup(field, 1);
    case kFixed32:
      return Skip(4);
    default:
      return false;  // An end-group tag without its group.
  }
}

}  // namespace paramd
