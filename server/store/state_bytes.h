// The byte strings a shard's state is saved as (ShardStore::SaveState,
// RowTable::Save): values appended in host order, read back front to
// back with every read saying whether it fit.
#ifndef PARAMD_SERVER_STORE_STATE_BYTES_H_
#define PARAMD_SERVER_STORE_STATE_BYTES_H_

#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

namespace paramd {

template <typename T>
void PutBytes(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

class ByteCursor {
 public:
  explicit ByteCursor(absl::string_view data) : data_(data) {}
  template <typename T>
  bool Get(T* value) {
    return Bytes(value, sizeof(T));
  }
  bool Bytes(void* out, size_t n) {
    if (data_.size() < n) return false;
    std::memcpy(out, data_.data(), n);
    data_.remove_prefix(n);
    return true;
  }
  bool done() const { return data_.empty(); }
  // What is left to read; reads through it move the cursor.
  absl::string_view* rest() { return &data_; }

 private:
  absl::string_view data_;
};

}  // namespace paramd

#endif  // PARAMD_SERVER_STORE_STATE_BYTES_H_
