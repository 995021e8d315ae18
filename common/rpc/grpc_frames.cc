#include "common/rpc/grpc_frames.h"

#include "absl/strings/str_cat.h"

namespace paramd {
namespace {

void ReleaseOwner(void* owner) {
  delete static_cast<std::shared_ptr<const void>*>(owner);
}

}  // namespace

void FrameBuilder::Flush() {
  if (pending_.empty()) return;
  slices_.emplace_back(pending_.data(), pending_.size());  // Copies.
  pending_.clear();
}

void FrameBuilder::AddReference(absl::string_view data) {
  if (data.empty()) return;
  // A slice of its own costs more than copying a few bytes.
  if (data.size() < kCopyBelow) {
    AddCopy(data);
    return;
  }
  Flush();
  slices_.emplace_back(const_cast<char*>(data.data()), data.size(),
                       &ReleaseOwner, new std::shared_ptr<const void>(owner_));
}

grpc::ByteBuffer FrameBuilder::Finish() {
  Flush();
  grpc::ByteBuffer buffer(slices_.data(), slices_.size());
  slices_.clear();
  return buffer;
}

absl::Status ReceivedFrame::Take(const grpc::ByteBuffer& buffer) {
  slices_.clear();
  views_.clear();
  grpc::Status s = buffer.Dump(&slices_);
  if (!s.ok()) {
    return absl::DataLossError(
        absl::StrCat("cannot read a received message: ", s.error_message()));
  }
  views_.reserve(slices_.size());
  for (const grpc::Slice& slice : slices_) {
    views_.emplace_back(reinterpret_cast<const char*>(slice.begin()),
                        slice.size());
  }
  return absl::OkStatus();
}

grpc::ByteBuffer SerializeMessage(
    const google::protobuf::MessageLite& message) {
  const std::string bytes = message.SerializeAsString();
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

bool ParseMessage(const grpc::ByteBuffer& buffer,
                  google::protobuf::MessageLite* message) {
  grpc::Slice whole;
  return buffer.DumpToSingleSlice(&whole).ok() &&
         message->ParseFromArray(whole.begin(), static_cast<int>(whole.size()));
}

}  // namespace paramd
