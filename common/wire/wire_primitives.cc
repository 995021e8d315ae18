#include "common/wire/wire_primitives.h"

#include "absl/strings/str_cat.h"

namespace paramd::wire {

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutTag(std::string* out, int field, WireType type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | type);
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void PutVarintField(std::string* out, int field, uint64_t v) {
  if (v == 0) return;
  PutTag(out, field, kVarint);
  PutVarint(out, v);
}

std::string LengthDelimitedTag(int field, size_t bytes) {
  std::string out;
  PutTag(&out, field, kLengthDelimited);
  PutVarint(&out, bytes);
  return out;
}

std::string SubmessageHeader(int field, const std::string& inner, int first,
                             size_t first_bytes, int second,
                             size_t second_bytes) {
  const std::string first_tag = LengthDelimitedTag(first, first_bytes);
  const size_t length = inner.size() + first_tag.size() + first_bytes +
                        LengthDelimitedTag(second, second_bytes).size() +
                        second_bytes;
  std::string out = LengthDelimitedTag(field, length);
  out += inner;
  out += first_tag;
  return out;
}

absl::Status Malformed(const char* message, const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat(message, ": malformed message: ", what));
}

bool IsUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    for (int k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const unsigned char b = static_cast<unsigned char>(s[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return false;
    }
    i += n + 1;
  }
  return true;
}

}  // namespace paramd::wire
