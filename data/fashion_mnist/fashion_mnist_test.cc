#include <zlib.h>

#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>

#include "data/fashion_mnist/fashion_mnist_options.pb.h"
#include "data/idx_reader.h"
#include "fl/dataset.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::HasSubstr;

// Writes a Fashion-MNIST-shaped fixture (real format, gzip) with `n_train` and
// `n_test` images where image i is filled with value (i * 37) % 256 and labelled i % 10.
// The reader insists on the real sizes, so the headers promise 60000/10000 only
// when `full` is set.
std::string MakeFixture(const std::string& name, int64_t n_train, int64_t n_test) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& prefix, int64_t n) {
    IdxArray images{{n, 28, 28}, {}};
    IdxArray labels{{n}, {}};
    for (int64_t i = 0; i < n; ++i) {
      images.values.insert(images.values.end(), 28 * 28, static_cast<uint8_t>((i * 37) % 256));
      labels.values.push_back(static_cast<uint8_t>(i % 10));
    }
    for (auto& [base, array] : {std::pair{prefix + "-images-idx3-ubyte", &images},
                                std::pair{prefix + "-labels-idx1-ubyte", &labels}}) {
      const std::string plain = dir + "/" + base;
      EXPECT_TRUE(WriteIdx(plain, *array).ok());
      std::ifstream in(plain, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), {});
      gzFile gz = gzopen((plain + ".gz").c_str(), "wb1");
      gzwrite(gz, bytes.data(), bytes.size());
      gzclose(gz);
      std::filesystem::remove(plain);
    }
  };
  write("train", n_train);
  write("t10k", n_test);
  return dir;
}

absl::StatusOr<std::unique_ptr<fl::Dataset>> Create(const std::string& dir, int train_limit = 0,
                                                    int test_limit = 0) {
  fedkit::data::FashionMnistOptions options;
  options.set_dir(dir);
  options.set_train_limit(train_limit);
  options.set_test_limit(test_limit);
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Dataset>::Global().Create("fashion_mnist", any);
}

TEST(FashionMnistTest, LoadsNormalisedImagesAndLabels) {
  const std::string dir = MakeFixture("full", 60000, 10000);
  auto dataset = *Create(dir, 100, 20);
  ASSERT_TRUE(dataset->CheckAvailable().ok());
  auto splits = dataset->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train.x.sizes(), (std::vector<int64_t>{100, 1, 28, 28}));
  EXPECT_EQ(splits->test.x.sizes(), (std::vector<int64_t>{20, 1, 28, 28}));
  EXPECT_EQ(splits->train.y[13].item<int64_t>(), 3);
  // Image 3 holds raw value 111 everywhere: (111 / 255 - 0.2860) / 0.3530.
  EXPECT_NEAR(splits->train.x[3][0][5][5].item<float>(), (111.0 / 255 - 0.2860) / 0.3530, 1e-5);
  EXPECT_EQ(dataset->info().num_classes, 10);
}

TEST(FashionMnistTest, MissingFilesNameWhereTheyMustGo) {
  auto dataset = *Create(std::string(getenv("TEST_TMPDIR")) + "/empty");
  absl::Status status = dataset->CheckAvailable();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("/empty/train-images-idx3-ubyte[.gz]"));
  EXPECT_THAT(status.message(), HasSubstr("dataset-fashion-mnist"));
  EXPECT_EQ(dataset->Load().status().code(), absl::StatusCode::kNotFound);
}

TEST(FashionMnistTest, AFolderOfOnesOwnMayHoldAnyNumberOfImages) {
  const std::string dir = MakeFixture("small", 50, 10);
  auto splits = (*Create(dir))->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train.size(), 50);
  EXPECT_EQ(splits->test.size(), 10);
}

TEST(FashionMnistTest, NegativeLimitsAreReportedTogether) {
  auto dataset = Create("/nowhere", -1, -2);
  EXPECT_EQ(dataset.status().message(),
            "options.train_limit: must be >= 0, got -1\noptions.test_limit: must be >= 0, got -2");
}

}  // namespace
}  // namespace data
