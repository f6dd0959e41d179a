#ifndef FL_TENSORBOARD_RECORD_WRITER_H_
#define FL_TENSORBOARD_RECORD_WRITER_H_

// TFRecord framing, the container of TensorBoard's event files: each record is
//   uint64 length, uint32 masked CRC-32C of the length's 8 bytes,
//   the payload, uint32 masked CRC-32C of the payload,
// integers little-endian. The mask is TensorFlow's: rotate right by 15, add
// 0xa282ead8.

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fl::tensorboard {

// CRC-32C (Castagnoli; iSCSI's, RFC 3720) of `bytes`.
uint32_t Crc32c(absl::string_view bytes);
uint32_t MaskedCrc32c(absl::string_view bytes);

// `payload` framed as one record.
std::string FrameRecord(absl::string_view payload);

// Appends records to a file, flushing each, so a reader (or a killed run) sees
// every record written so far.
class RecordWriter {
 public:
  // Truncates `path`.
  static absl::StatusOr<RecordWriter> Create(const std::string& path);

  absl::Status Write(absl::string_view payload);

 private:
  explicit RecordWriter(std::string path, std::ofstream out)
      : path_(std::move(path)), out_(std::move(out)) {}

  std::string path_;
  std::ofstream out_;
};

}  // namespace fl::tensorboard

#endif  // FL_TENSORBOARD_RECORD_WRITER_H_
