#ifndef DATA_TEST_FIXTURES_H_
#define DATA_TEST_FIXTURES_H_

// File helpers for dataset tests, which write small fixtures in the real on-disk
// formats under TEST_TMPDIR.

#include <cstddef>
#include <cstdint>
#include <string>

namespace data::fixtures {

// TEST_TMPDIR/name, created (with parents) if missing.
std::string TestDir(const std::string& name);

void WriteFile(const std::string& path, const std::string& bytes);
std::string ReadFile(const std::string& path);

// Replaces `path` by a gzip-compressed `path`.gz.
void GzipInPlace(const std::string& path);

// Drops the last `bytes` bytes of `path`.
void Truncate(const std::string& path, size_t bytes);

// One binary CIFAR record: `labels` (the label bytes), then a 32x32 image whose red
// plane is `red`, green red + 1 and blue red + 2, except pixel (0, 0) of the red
// plane, which is 255.
std::string CifarRecord(const std::string& labels, uint8_t red);

}  // namespace data::fixtures

#endif  // DATA_TEST_FIXTURES_H_
