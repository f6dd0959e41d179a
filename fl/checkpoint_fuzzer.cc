// Fuzz target: ParseCheckpoint on arbitrary bytes followed by their correct
// CRC-32, so that mutations reach the records behind the checksum (the checksum
// itself is tested in checkpoint_test). The result is a checkpoint or an error,
// never a crash or an allocation beyond the input. What parses must survive a
// round trip: its serialisation parses, and serialises to the same bytes again.
// (Not to the input's bytes: protobuf reads many encodings of one message, such
// as fields out of order or repeated, and writes one.)

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fl/checkpoint.h"

namespace {

[[noreturn]] void Fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "checkpoint round trip: %s: %s\n", what, status.ToString().c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  const uint32_t crc = static_cast<uint32_t>(crc32_z(crc32_z(0L, Z_NULL, 0), data, size));
  for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<char>(crc >> (8 * i)));
  absl::StatusOr<fl::Checkpoint> checkpoint = fl::ParseCheckpoint(bytes, "fuzz", at::kCPU);
  if (!checkpoint.ok()) return 0;

  absl::StatusOr<std::string> written = fl::SerializeCheckpoint(*checkpoint);
  if (!written.ok()) Fail("a parsed checkpoint does not serialise", written.status());
  absl::StatusOr<fl::Checkpoint> reread = fl::ParseCheckpoint(*written, "rewritten", at::kCPU);
  if (!reread.ok()) Fail("a written checkpoint does not parse", reread.status());
  absl::StatusOr<std::string> rewritten = fl::SerializeCheckpoint(*reread);
  if (!rewritten.ok()) Fail("a reread checkpoint does not serialise", rewritten.status());
  if (*rewritten != *written) Fail("serialise(parse(bytes)) changed the bytes", absl::OkStatus());
  return 0;
}
