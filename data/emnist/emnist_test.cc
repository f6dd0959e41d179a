#include <cstdlib>
#include <string>

#include <ATen/ATen.h>

#include "data/emnist/emnist_options.pb.h"
#include "data/idx_reader.h"
#include "data/test_fixtures.h"
#include "fl/dataset.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::data::fixtures::TestDir;
using fedkit::data::EmnistOptions;
using ::testing::StartsWith;

// An upright "L": a vertical stroke in column 3 (rows 5..20) and a base in row 20
// (columns 3..12). Image i is the L with value 100 + i.
at::Tensor UprightL(int i) {
  at::Tensor image = at::zeros({28, 28}, at::kByte);
  image.index_put_({at::indexing::Slice(5, 21), 3}, 100 + i);
  image.index_put_({20, at::indexing::Slice(3, 13)}, 100 + i);
  return image;
}

// Writes a split as EMNIST does: each image stored transposed, labels as given.
// Train files are gzip-compressed (as distributed), test files plain.
void WriteSplit(const std::string& dir, const std::string& prefix,
                const std::vector<uint8_t>& labels, bool gzip) {
  const int64_t n = labels.size();
  IdxArray images{{n, 28, 28}, {}};
  for (int64_t i = 0; i < n; ++i) {
    at::Tensor stored = UprightL(i).t().contiguous();
    images.values.insert(images.values.end(), stored.data_ptr<uint8_t>(),
                         stored.data_ptr<uint8_t>() + 28 * 28);
  }
  const std::string base = dir + "/" + prefix;
  ASSERT_TRUE(WriteIdx(base + "-images-idx3-ubyte", images).ok());
  ASSERT_TRUE(WriteIdx(base + "-labels-idx1-ubyte", IdxArray{{n}, labels}).ok());
  if (gzip) {
    fixtures::GzipInPlace(base + "-images-idx3-ubyte");
    fixtures::GzipInPlace(base + "-labels-idx1-ubyte");
  }
}

absl::StatusOr<std::unique_ptr<fl::Dataset>> Create(const EmnistOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Dataset>::Global().Create("emnist", any);
}

EmnistOptions Options(const std::string& dir, EmnistOptions::Split split) {
  EmnistOptions options;
  options.set_dir(dir);
  options.set_split(split);
  return options;
}

TEST(EmnistTest, TransposesImagesUpright) {
  const std::string dir = TestDir("upright");
  WriteSplit(dir, "emnist-byclass-train", {0, 61, 35}, /*gzip=*/true);
  WriteSplit(dir, "emnist-byclass-test", {7, 8}, /*gzip=*/false);
  EmnistOptions options = Options(dir, EmnistOptions::BYCLASS);
  options.set_normalize(false);
  auto dataset = *Create(options);
  ASSERT_TRUE(dataset->CheckAvailable().ok());
  auto splits = dataset->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(dataset->info().num_classes, 62);
  EXPECT_EQ(splits->train.x.sizes(), (std::vector<int64_t>{3, 1, 28, 28}));
  EXPECT_EQ(splits->train.y[1].item<int64_t>(), 61);
  for (int i = 0; i < 3; ++i) {
    at::Tensor loaded = splits->train.x[i][0].mul(255).round().to(at::kByte);
    EXPECT_TRUE(at::equal(loaded, UprightL(i))) << "image " << i;
  }
  // Concretely: the stroke is vertical (column 3), the base horizontal (row 20).
  EXPECT_FLOAT_EQ(splits->test.x[1][0][10][3].item<float>(), 101 / 255.0f);
  EXPECT_FLOAT_EQ(splits->test.x[1][0][3][10].item<float>(), 0.0f);
  EXPECT_FLOAT_EQ(splits->test.x[1][0][20][12].item<float>(), 101 / 255.0f);
}

TEST(EmnistTest, LettersAreShiftedToStartAtZeroAndNormalised) {
  const std::string dir = TestDir("letters");
  WriteSplit(dir, "emnist-letters-train", {1, 26, 5}, /*gzip=*/true);
  WriteSplit(dir, "emnist-letters-test", {2}, /*gzip=*/true);
  auto dataset = *Create(Options(dir, EmnistOptions::LETTERS));
  auto splits = dataset->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(dataset->info().num_classes, 26);
  EXPECT_TRUE(at::equal(splits->train.y, at::tensor({0, 25, 4}, at::kLong)));
  EXPECT_EQ(splits->test.y[0].item<int64_t>(), 1);
  EXPECT_NEAR(splits->train.x[0][0][0][0].item<float>(), (0 - 0.172) / 0.331, 1e-5);

  // Label 0 is not a letter.
  WriteSplit(dir, "emnist-letters-test", {0}, /*gzip=*/false);
  std::remove((dir + "/emnist-letters-test-images-idx3-ubyte.gz").c_str());
  std::remove((dir + "/emnist-letters-test-labels-idx1-ubyte.gz").c_str());
  EXPECT_EQ(std::string(dataset->Load().status().message()),
            dir + "/emnist-letters-test-labels-idx1-ubyte: label 0 at index 0 out of [1, 26]");
}

TEST(EmnistTest, ClassCountsPerSplit) {
  const std::pair<EmnistOptions::Split, int64_t> expected[] = {
      {EmnistOptions::BYCLASS, 62}, {EmnistOptions::BYMERGE, 47}, {EmnistOptions::BALANCED, 47},
      {EmnistOptions::LETTERS, 26}, {EmnistOptions::DIGITS, 10},  {EmnistOptions::MNIST, 10}};
  for (const auto& [split, classes] : expected) {
    EXPECT_EQ((*Create(Options("/nowhere", split)))->info().num_classes, classes)
        << EmnistOptions::Split_Name(split);
  }
}

TEST(EmnistTest, BalancedLabelBeyondItsClassesIsAnError) {
  const std::string dir = TestDir("balanced");
  WriteSplit(dir, "emnist-balanced-train", {46, 47}, /*gzip=*/true);
  WriteSplit(dir, "emnist-balanced-test", {0}, /*gzip=*/true);
  EXPECT_EQ(
      std::string((*Create(Options(dir, EmnistOptions::BALANCED)))->Load().status().message()),
      dir + "/emnist-balanced-train-labels-idx1-ubyte.gz: label 47 at index 1 out of [0, 46]");
}

TEST(EmnistTest, MissingFilesNameDistributedFileNames) {
  const std::string dir = TestDir("empty");
  fixtures::WriteFile(dir + "/emnist-digits-test-labels-idx1-ubyte.gz", "");
  auto dataset = *Create(Options(dir, EmnistOptions::DIGITS));
  absl::Status status = dataset->CheckAvailable();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(status.message()),
            "dataset (emnist): missing " + dir + "/emnist-digits-train-images-idx3-ubyte[.gz], " +
                dir + "/emnist-digits-train-labels-idx1-ubyte[.gz], " + dir +
                "/emnist-digits-test-images-idx3-ubyte[.gz]. Unzip the gzip/ folder of EMNIST's "
                "gzip.zip (NIST's IDX release) into " +
                dir + ", or set options.dir to the folder holding them");
}

TEST(EmnistTest, TruncatedGzipAndWrongMagicAreErrors) {
  const std::string dir = TestDir("broken");
  WriteSplit(dir, "emnist-mnist-train", {1, 2, 3}, /*gzip=*/true);
  WriteSplit(dir, "emnist-mnist-test", {4}, /*gzip=*/false);
  const std::string images = dir + "/emnist-mnist-train-images-idx3-ubyte.gz";
  // A gzip stream cut short (how much of it decompresses depends on zlib).
  const std::string bytes = fixtures::ReadFile(images);
  fixtures::WriteFile(images, bytes.substr(0, bytes.size() / 2));
  auto dataset = *Create(Options(dir, EmnistOptions::MNIST));
  absl::Status status = dataset->Load().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              StartsWith(images + ": truncated: header promises 2352 data bytes, file holds "));
  // A whole gzip stream of a truncated file.
  const std::string plain = dir + "/emnist-mnist-train-images-idx3-ubyte";
  WriteSplit(dir, "emnist-mnist-train", {1, 2, 3}, /*gzip=*/false);
  fixtures::Truncate(plain, 300);
  fixtures::GzipInPlace(plain);
  EXPECT_EQ(std::string(dataset->Load().status().message()),
            images + ": truncated: header promises 2352 data bytes, file holds 2052");

  // Labels where images should be: the magic says 1 dimension, not 3.
  WriteSplit(dir, "emnist-mnist-train", {1, 2, 3}, /*gzip=*/true);
  fixtures::WriteFile(dir + "/emnist-mnist-test-images-idx3-ubyte",
                      fixtures::ReadFile(dir + "/emnist-mnist-test-labels-idx1-ubyte"));
  EXPECT_EQ(std::string(dataset->Load().status().message()),
            dir + "/emnist-mnist-test-images-idx3-ubyte: expected images of 28x28, got dims 1");
  // A picture where the images should be.
  fixtures::WriteFile(dir + "/emnist-mnist-test-images-idx3-ubyte", "GIF89a, not an IDX file");
  EXPECT_EQ(std::string(dataset->Load().status().message()),
            dir + "/emnist-mnist-test-images-idx3-ubyte: not an IDX file (bad magic number)");
}

TEST(EmnistTest, LimitsKeepTheFirstExamplesOfEachSplit) {
  const std::string dir = TestDir("limits");
  WriteSplit(dir, "emnist-digits-train", {3, 1, 4}, /*gzip=*/true);
  WriteSplit(dir, "emnist-digits-test", {1, 5, 9}, /*gzip=*/false);
  EmnistOptions options = Options(dir, EmnistOptions::DIGITS);
  options.set_normalize(false);
  options.set_train_limit(2);
  options.set_test_limit(1);
  auto splits = (*Create(options))->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_TRUE(at::equal(splits->train.y, at::tensor({3, 1}, at::kLong))) << splits->train.y;
  EXPECT_EQ(splits->train.x.size(0), 2);
  EXPECT_TRUE(at::equal(splits->test.y, at::tensor({1}, at::kLong))) << splits->test.y;
  ASSERT_EQ(splits->test.x.size(0), 1);
  // The kept test image is the first one (value 100), upright.
  EXPECT_TRUE(at::equal(splits->test.x[0][0].mul(255).round().to(at::kByte), UprightL(0)));

  options.set_test_limit(-4);
  EXPECT_EQ(std::string(Create(options).status().message()),
            "options.test_limit: must be >= 0, got -4");
}

TEST(EmnistTest, SplitIsRequiredAndLimitsNonNegative) {
  EmnistOptions options;
  options.set_train_limit(-3);
  EXPECT_EQ(std::string(Create(options).status().message()),
            "options.split: must be set: BYCLASS, BYMERGE, BALANCED, LETTERS, DIGITS or MNIST\n"
            "options.train_limit: must be >= 0, got -3");
}

}  // namespace
}  // namespace data
