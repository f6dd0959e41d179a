#include "data/dataset_files.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace data {

bool FileExists(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  std::fclose(f);
  return true;
}

namespace {

// `dir/base.gz` when it exists, else `dir/base` when it exists, else "".
std::string ResolveMaybeGzipped(const std::string& dir, const std::string& base) {
  for (const std::string& path :
       {absl::StrCat(dir, "/", base, ".gz"), absl::StrCat(dir, "/", base)}) {
    if (FileExists(path)) return path;
  }
  return "";
}

}  // namespace

std::string DefaultDatasetDir(const std::string& name) {
  const char* root = std::getenv("FEDKIT_DATA_DIR");
  if (root != nullptr && root[0] != '\0') return absl::StrCat(root, "/", name);
  const char* home = std::getenv("HOME");
  return absl::StrCat(home != nullptr ? home : "", "/.cache/fedkit/", name);
}

absl::StatusOr<std::vector<std::string>> ResolveDatasetFiles(const std::string& dataset,
                                                             const std::string& dir,
                                                             const std::vector<std::string>& bases,
                                                             bool gzip_ok,
                                                             const std::string& hint) {
  std::vector<std::string> paths;
  std::vector<std::string> missing;
  for (const std::string& base : bases) {
    const std::string plain = absl::StrCat(dir, "/", base);
    std::string path = gzip_ok ? ResolveMaybeGzipped(dir, base) : (FileExists(plain) ? plain : "");
    if (path.empty()) missing.push_back(gzip_ok ? absl::StrCat(plain, "[.gz]") : plain);
    paths.push_back(std::move(path));
  }
  if (missing.empty()) return paths;
  return absl::NotFoundError(
      absl::StrCat("dataset (", dataset, "): missing ", absl::StrJoin(missing, ", "), ". ", hint));
}

void CheckExampleLimits(int64_t train_limit, int64_t test_limit, fl::ErrorList& errors) {
  if (train_limit < 0) {
    errors.Add("options.train_limit", absl::StrCat("must be >= 0, got ", train_limit));
  }
  if (test_limit < 0) {
    errors.Add("options.test_limit", absl::StrCat("must be >= 0, got ", test_limit));
  }
}

}  // namespace data
