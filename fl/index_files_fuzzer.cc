// Fuzz target: the partition and proxy file readers (fl/index_files.h) on
// arbitrary text; never a crash. What they accept keeps their promises (every index
// in range and owned once) and round-trips: written back by PartitionFileJson or
// ProxyFileJson, it reads back the same.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fl/index_files.h"

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "index files: %s\n", what.c_str());
  std::abort();
}

// Beyond this the checks' per-example table is the fuzzer's memory, not a bug.
constexpr int64_t kMaxExamples = 1 << 20;
constexpr int64_t kProxySplitSize = 1000;

void CheckPartition(absl::string_view json) {
  absl::StatusOr<fedkit::PartitionFile> file = fl::ParsePartitionFile(json, "fuzz.json");
  if (!file.ok() || file->num_examples() < 0 || file->num_examples() > kMaxExamples) return;
  const int64_t n = file->num_examples();
  auto shares = fl::PartitionFromFile(*file, "fuzz.json", n, file->clients_size());
  if (!shares.ok()) return;
  std::vector<bool> owned(n, false);
  for (const std::vector<int64_t>& share : *shares) {
    if (share.empty()) Fail("an empty client was accepted");
    for (int64_t i : share) {
      if (i < 0 || i >= n) Fail("an index out of range was accepted");
      if (owned[i]) Fail("an index owned twice was accepted");
      owned[i] = true;
    }
  }
  auto reread = fl::ParsePartitionFile(fl::PartitionFileJson(n, *shares), "rewritten.json");
  if (!reread.ok()) Fail("a partition written back does not parse: " + reread.status().ToString());
  auto again = fl::PartitionFromFile(*reread, "rewritten.json", n, reread->clients_size());
  if (!again.ok() || *again != *shares) Fail("a partition written back reads back differently");
}

void CheckProxy(absl::string_view json) {
  auto indices = fl::ParseProxyFile(json, "fuzz.json", kProxySplitSize, "TEST");
  if (!indices.ok()) return;
  std::vector<bool> taken(kProxySplitSize, false);
  for (int64_t i : *indices) {
    if (i < 0 || i >= kProxySplitSize) Fail("a proxy index out of range was accepted");
    if (taken[i]) Fail("a proxy index listed twice was accepted");
    taken[i] = true;
  }
  auto again = fl::ParseProxyFile(fl::ProxyFileJson(*indices), "rewritten.json",
                                  kProxySplitSize, "TEST");
  if (!again.ok() || *again != *indices) Fail("a proxy file written back reads back differently");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  CheckPartition(json);
  CheckProxy(json);
  return 0;
}
