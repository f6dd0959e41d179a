#include "fl/tensorboard/record_writer.h"

#include <boost/crc.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace fl::tensorboard {
namespace {

std::string LittleEndian(uint64_t value, int bytes) {
  std::string out(bytes, '\0');
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

}  // namespace

uint32_t Crc32c(absl::string_view bytes) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

uint32_t MaskedCrc32c(absl::string_view bytes) {
  const uint32_t crc = Crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string FrameRecord(absl::string_view payload) {
  const std::string length = LittleEndian(payload.size(), 8);
  return absl::StrCat(length, LittleEndian(MaskedCrc32c(length), 4), payload,
                      LittleEndian(MaskedCrc32c(payload), 4));
}

absl::StatusOr<RecordWriter> RecordWriter::Create(const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot create ", path));
  return RecordWriter(path, std::move(out));
}

absl::Status RecordWriter::Write(absl::string_view payload) {
  const std::string record = FrameRecord(payload);
  out_.write(record.data(), static_cast<std::streamsize>(record.size()));
  out_.flush();
  if (!out_.good()) return absl::UnavailableError(absl::StrCat("cannot append to ", path_));
  return absl::OkStatus();
}

}  // namespace fl::tensorboard
