// The protobuf wire format's primitives, shared by the hand-written
// encoders and decoders (common/wire/wire_format.h, common/wire/row_wire.h).
#ifndef PARAMD_COMMON_WIRE_WIRE_PRIMITIVES_H_
#define PARAMD_COMMON_WIRE_WIRE_PRIMITIVES_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace paramd::wire {

enum WireType { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void PutVarint(std::string* out, uint64_t v);
void PutTag(std::string* out, int field, WireType type);
size_t VarintSize(uint64_t v);
// proto3 leaves fields at their default out; so does this (v == 0).
void PutVarintField(std::string* out, int field, uint64_t v);
// The tag and length of length-delimited field `field` of `bytes` bytes.
std::string LengthDelimitedTag(int field, size_t bytes);
// The framing of a submessage, field `field` of its parent, made of the
// encoded varint fields `inner`, then bytes field `first` of `first_bytes`,
// then bytes field `second` of `second_bytes`: what precedes the first
// field's bytes (LengthDelimitedTag(second, second_bytes) sits between the
// two).
std::string SubmessageHeader(int field, const std::string& inner, int first,
                             size_t first_bytes, int second,
                             size_t second_bytes);
// InvalidArgument "<message>: malformed message: <what>".
absl::Status Malformed(const char* message, const char* what);
// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), as protobuf requires of a proto3
// string.
bool IsUtf8(absl::string_view s);

}  // namespace paramd::wire

#endif  // PARAMD_COMMON_WIRE_WIRE_PRIMITIVES_H_
