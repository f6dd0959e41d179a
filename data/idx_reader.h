#ifndef DATA_IDX_READER_H_
#define DATA_IDX_READER_H_

// The IDX format of MNIST, Fashion-MNIST and EMNIST: a 4-byte magic (0, 0, type,
// number of dimensions), big-endian uint32 sizes, then the data. Only unsigned-byte
// data (type 0x08) is used by these datasets. Files may be gzip-compressed or not.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;  // row-major, product(dims) of them
};

// NotFound for a missing file; InvalidArgument naming the file for a bad magic,
// an unsupported type, a truncated file or trailing bytes.
absl::StatusOr<IdxArray> ReadIdx(const std::string& path);

// Writes `array` as an uncompressed IDX file (for fixtures and conversions).
absl::Status WriteIdx(const std::string& path, const IdxArray& array);

}  // namespace data

#endif  // DATA_IDX_READER_H_
