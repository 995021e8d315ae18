// ClickLogFile: one rank's share of a click log (data.format: clicks),
// streamed from the file, never held whole.
//
// The format: one sample per line, gzip-compressed or plain text — its
// label (a class index, 0 or 1 for clicks), then its dense features' values
// when the model reads any (embedding_concat's `dense`), then each
// categorical field's token, separated by tabs:
//
//   1<TAB>5<TAB>0<TAB>...<TAB>05db9164<TAB>38a947a1<TAB>...<TAB>e8b83407
//
// as in the Criteo display-ads logs (13 integer columns, then 26
// categorical ones). A dense value is a number (an empty one is missing:
// 0); the model reads log(1 + max(v, 0)), as DLRM preprocesses Criteo's
// counts. A token is any
// text without a tab (an empty one is the field's "missing" value); token
// t of field f is row ClickRow(f, t, rows) of the model's table, so the
// same value in two fields is two rows. The file is checked whole when it
// opens (every line's field count and label; errors name file and line),
// then read in order: samples i with i % world == rank are the rank's.
#ifndef PARAMD_WORKER_DATA_CLICK_LOG_FILE_H_
#define PARAMD_WORKER_DATA_CLICK_LOG_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace paramd {

// The table row of `token` in field `field`, of a table of `rows`.
uint64_t ClickRow(int field, absl::string_view token, uint64_t rows);

class ClickLogFile {
 public:
  // Opens `path`, whose lines must hold a label, `dense` values and
  // `fields` tokens; keeps the first `limit` samples (0: all) and of those
  // rank `rank`'s share of `world`. Ids are rows of a table of `table_rows`.
  static absl::StatusOr<std::unique_ptr<ClickLogFile>> Open(
      const std::string& path, int fields, int dense, uint64_t table_rows,
      int64_t limit, int rank, int world);
  ~ClickLogFile();

  int fields() const { return fields_; }
  int dense() const { return dense_; }
  int64_t full_size() const { return full_size_; }  // The file's, limited.
  int64_t size() const { return size_; }            // The rank's share.
  int num_classes() const { return num_classes_; }  // 1 + the largest label.

  // The share's samples [first, first + n) (n clipped at the share's end):
  // ids [n × fields], dense features [n × dense] (log(1 + max(v, 0)); not
  // written without any) and labels; returns how many. Reading on from where
  // the last read ended is sequential; any other `first` reads the file
  // from its start up to there.
  absl::StatusOr<int> Read(int64_t first, int n, uint64_t* ids, float* dense,
                           int32_t* y);

 private:
  ClickLogFile(std::string path, int fields, int dense, uint64_t table_rows,
               int rank, int world);
  absl::Status Rewind();
  // The next line of the file into line_; false at its end.
  absl::StatusOr<bool> NextLine();
  // Parses line_ (line number `number`) into ids/dense/label.
  absl::Status Parse(int64_t number, uint64_t* ids, float* dense,
                     int32_t* label) const;

  const std::string path_;
  const int fields_;
  const int dense_;
  const uint64_t table_rows_;
  const int rank_, world_;
  int64_t full_size_ = 0, size_ = 0;
  int num_classes_ = 0;
  void* file_ = nullptr;  // gzFile
  std::string line_;
  int64_t line_number_ = 0;  // Lines read since the start.
  int64_t next_ = 0;         // The share's sample the next read gives.
};

}  // namespace paramd

#endif  // PARAMD_WORKER_DATA_CLICK_LOG_FILE_H_
