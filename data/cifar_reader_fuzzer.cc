// Fuzz target: ReadCifarRecords on arbitrary bytes as one CIFAR-100 file, then
// CifarToExamples. Whatever the bytes, the records are an error or exactly the
// file's content: each record's fine label byte and its 3072 image bytes, in file
// order (a whole number of records, every label in range); the examples hold the
// same images and labels. Never a crash.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <ATen/ATen.h>

#include "data/cifar_reader.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "CIFAR reader: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = [] {
    const char* dir = std::getenv("TEST_TMPDIR");
    return std::string(dir != nullptr ? dir : "/tmp") + "/cifar_fuzz_" + std::to_string(::getpid());
  }();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const data::CifarFormat format{"CIFAR-100", {20, 100}, 1};
  absl::StatusOr<data::CifarRecords> records = data::ReadCifarRecords({path}, format);
  if (!records.ok()) return 0;
  const int64_t record_bytes = format.record_bytes();
  if (records->size() * record_bytes != static_cast<int64_t>(size)) {
    Fail("the records are not the whole file");
  }
  if (records->images.size() != records->labels.size() * data::kCifarImageBytes) {
    Fail("images and labels disagree in number");
  }
  for (int64_t i = 0; i < records->size(); ++i) {
    const uint8_t* record = data + i * record_bytes;
    if (record[0] >= 20 || record[1] >= 100) Fail("a label out of range was accepted");
    if (records->labels[i] != record[1]) Fail("a label is not the record's fine label");
    if (std::memcmp(records->images.data() + i * data::kCifarImageBytes, record + 2,
                    data::kCifarImageBytes) != 0) {
      Fail("an image is not the record's bytes");
    }
  }

  const fl::Examples examples =
      data::CifarToExamples(*records, /*limit=*/0, data::ChannelStats{3, {0, 0, 0}, {1, 1, 1}},
                            /*normalize=*/false);
  if (examples.x.sizes() != at::IntArrayRef({records->size(), 3, 32, 32}) ||
      examples.size() != records->size()) {
    Fail("the examples' shapes do not match the records");
  }
  const at::Tensor images =
      at::from_blob(records->images.data(), {records->size(), 3, 32, 32}, at::kByte);
  if (!examples.x.mul(255).round().to(at::kByte).equal(images)) {
    Fail("the examples' inputs are not the images scaled to [0, 1]");
  }
  const at::Tensor labels = at::from_blob(records->labels.data(), {records->size()}, at::kByte);
  if (!examples.y.equal(labels.to(examples.y.scalar_type()))) {
    Fail("the examples' targets are not the labels");
  }
  return 0;
}
