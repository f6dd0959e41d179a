// Fuzz target: ReadIdx on arbitrary bytes (plain; gzip when they start like gzip).
// Whatever the bytes, it returns an array whose dims multiply to its size, or an
// error; never a crash or an allocation beyond the file. An array read from a
// plain file round-trips: WriteIdx gives back the very bytes it was read from
// (IDX has one encoding of each array); one read from gzip reads back equal.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "data/idx_reader.h"

namespace {

std::string TempPath(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name + std::to_string(::getpid());
}

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "IDX round trip: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = TempPath("idx_fuzz_");
  static const std::string written = TempPath("idx_fuzz_written_");
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << input;
  absl::StatusOr<data::IdxArray> array = data::ReadIdx(path);
  if (!array.ok()) return 0;
  int64_t total = 1;
  for (int64_t d : array->dims) total *= d;
  if (total != static_cast<int64_t>(array->values.size())) Fail("dims do not multiply to the size");

  if (!data::WriteIdx(written, *array).ok()) Fail("cannot write what was read");
  const bool gzip = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
  if (!gzip) {
    std::ifstream in(written, std::ios::binary);
    if (std::string(std::istreambuf_iterator<char>(in), {}) != input) {
      Fail("WriteIdx(ReadIdx(bytes)) differs from the bytes");
    }
  }
  absl::StatusOr<data::IdxArray> reread = data::ReadIdx(written);
  if (!reread.ok() || reread->dims != array->dims || reread->values != array->values) {
    Fail("ReadIdx(WriteIdx(array)) differs from the array");
  }
  return 0;
}
