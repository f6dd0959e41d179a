#include "data/idx_reader.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"

namespace data {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
constexpr int kMaxDims = 4;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads up to `n` bytes; fewer only at the end of the (decompressed) stream.
absl::StatusOr<size_t> ReadBytes(gzFile file, const std::string& path, uint8_t* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(file, out + done, chunk);
    if (got < 0) {
      int code = 0;
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cannot decompress: ", gzerror(file, &code)));
    }
    if (got == 0) break;
    done += got;
  }
  return done;
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdx(const std::string& path) {
  if (!std::ifstream(path).good()) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  // gzopen reads plain files transparently.
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));

  uint8_t magic[4];
  auto got = ReadBytes(file.get(), path, magic, 4);
  if (!got.ok()) return got.status();
  if (*got < 4 || magic[0] != 0 || magic[1] != 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not an IDX file (bad magic number)"));
  }
  if (magic[2] != kUnsignedByte) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": IDX data type 0x", absl::Hex(magic[2]), " is not supported (expected 0x08, unsigned byte)"));
  }
  const int ndims = magic[3];
  if (ndims < 1 || ndims > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": IDX file has ", ndims, " dimensions, expected 1 to ", kMaxDims));
  }
  IdxArray array;
  int64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    uint8_t b[4];
    got = ReadBytes(file.get(), path, b, 4);
    if (!got.ok()) return got.status();
    if (*got < 4) return absl::InvalidArgumentError(absl::StrCat(path, ": truncated header"));
    const int64_t size = (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    if (size > 0 && total > std::numeric_limits<int64_t>::max() / size) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": header sizes multiply past 2^63 bytes"));
    }
    array.dims.push_back(size);
    total *= size;
  }
  // The header's sizes are only a claim: the buffer grows as data actually arrives,
  // so a header promising billions of images cannot allocate more than the file holds
  // (a plain file's size bounds each step; a gzip stream's is only known once read).
  constexpr int64_t kChunk = int64_t{1} << 24;
  std::optional<int64_t> plain_data_bytes;
  if (gzdirect(file.get())) {
    std::error_code error;
    const auto file_bytes = std::filesystem::file_size(path, error);
    if (!error) plain_data_bytes = static_cast<int64_t>(file_bytes) - 4 * (ndims + 1);
  }
  while (static_cast<int64_t>(array.values.size()) < total) {
    const size_t before = array.values.size();
    int64_t step = std::min<int64_t>(kChunk, total - before);
    if (plain_data_bytes.has_value()) {
      step = std::min<int64_t>(step, std::max<int64_t>(1, *plain_data_bytes - before));
    }
    const size_t want = static_cast<size_t>(step);
    array.values.resize(before + want);
    got = ReadBytes(file.get(), path, array.values.data() + before, want);
    if (!got.ok()) return got.status();
    array.values.resize(before + *got);
    if (*got < want) break;
  }
  if (static_cast<int64_t>(array.values.size()) < total) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated: header promises ", total,
                                                   " data bytes, file holds ",
                                                   array.values.size()));
  }
  uint8_t extra;
  got = ReadBytes(file.get(), path, &extra, 1);
  if (!got.ok()) return got.status();
  if (*got != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": trailing bytes after the ", total, " data bytes the header promises"));
  }
  return array;
}

absl::Status WriteIdx(const std::string& path, const IdxArray& array) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint8_t magic[4] = {0, 0, kUnsignedByte, static_cast<uint8_t>(array.dims.size())};
  out.write(reinterpret_cast<const char*>(magic), 4);
  for (int64_t d : array.dims) {
    const uint8_t b[4] = {static_cast<uint8_t>(d >> 24), static_cast<uint8_t>(d >> 16),
                          static_cast<uint8_t>(d >> 8), static_cast<uint8_t>(d)};
    out.write(reinterpret_cast<const char*>(b), 4);
  }
  out.write(reinterpret_cast<const char*>(array.values.data()), array.values.size());
  if (!out.good()) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace data
