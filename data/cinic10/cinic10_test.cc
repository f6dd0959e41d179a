#include <memory>
#include <string>
#include <utility>

#include <ATen/ATen.h>

#include "data/cinic10/cinic10_options.pb.h"
#include "data/test_fixtures.h"
#include "fl/dataset.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::data::fixtures::CifarRecord;
using ::data::fixtures::TestDir;
using ::data::fixtures::WriteFile;

// train.bin: labels 0, 1; valid.bin: 2; test.bin: 3, 4, 5 (red planes 10, 11, ...).
std::string MakeFixture(const std::string& name) {
  const std::string dir = TestDir(name);
  WriteFile(dir + "/train.bin", CifarRecord(std::string(1, '\0'), 10) + CifarRecord("\x01", 11));
  WriteFile(dir + "/valid.bin", CifarRecord("\x02", 12));
  WriteFile(dir + "/test.bin",
            CifarRecord("\x03", 13) + CifarRecord("\x04", 14) + CifarRecord("\x05", 15));
  return dir;
}

std::unique_ptr<fl::Dataset> Create(const std::string& dir, bool with_valid) {
  fedkit::data::Cinic10Options options;
  options.set_dir(dir);
  options.set_include_valid_in_train(with_valid);
  google::protobuf::Any any;
  any.PackFrom(options);
  return *fl::Registry<fl::Dataset>::Global().Create("cinic10", any);
}

TEST(Cinic10Test, TrainsOnTrainAloneByDefault) {
  auto dataset = Create(MakeFixture("train_only"), /*with_valid=*/false);
  auto splits = dataset->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(dataset->info().num_classes, 10);
  EXPECT_EQ(dataset->info().input_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_TRUE(at::equal(splits->train.y, at::tensor({0, 1}, at::kLong)));
  EXPECT_TRUE(at::equal(splits->test.y, at::tensor({3, 4, 5}, at::kLong)));
  EXPECT_NEAR(splits->train.x[1][0][2][2].item<float>(), (11 / 255.0 - 0.47889522) / 0.24205776,
              1e-5);
  EXPECT_NEAR(splits->test.x[0][2][2][2].item<float>(), (15 / 255.0 - 0.43047404) / 0.25874835,
              1e-5);
}

TEST(Cinic10Test, IncludeValidAppendsItToTrain) {
  auto splits = Create(MakeFixture("with_valid"), /*with_valid=*/true)->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_TRUE(at::equal(splits->train.y, at::tensor({0, 1, 2}, at::kLong)));
  EXPECT_EQ(splits->test.size(), 3);
}

absl::StatusOr<std::unique_ptr<fl::Dataset>> CreateWith(
    const fedkit::data::Cinic10Options& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Dataset>::Global().Create("cinic10", any);
}

TEST(Cinic10Test, LimitsKeepTheFirstRecordsOfEachSplit) {
  fedkit::data::Cinic10Options options;
  options.set_dir(MakeFixture("limits"));
  options.set_train_limit(1);
  options.set_test_limit(2);
  auto splits = (*CreateWith(options))->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_TRUE(at::equal(splits->train.y, at::tensor({0}, at::kLong))) << splits->train.y;
  EXPECT_EQ(splits->train.x.size(0), 1);
  EXPECT_TRUE(at::equal(splits->test.y, at::tensor({3, 4}, at::kLong))) << splits->test.y;
  EXPECT_EQ(splits->test.x.size(0), 2);

  // With valid.bin the limit cuts train + valid, in that order.
  options.set_include_valid_in_train(true);
  options.set_train_limit(2);
  splits = (*CreateWith(options))->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_TRUE(at::equal(splits->train.y, at::tensor({0, 1}, at::kLong))) << splits->train.y;

  options.set_train_limit(-1);
  options.set_test_limit(-2);
  EXPECT_EQ(std::string(CreateWith(options).status().message()),
            "options.train_limit: must be >= 0, got -1\noptions.test_limit: must be >= 0, got -2");
}

TEST(Cinic10Test, NormalizeFalseKeepsPixelsInTheUnitRange) {
  fedkit::data::Cinic10Options options;
  options.set_dir(MakeFixture("normalize"));
  options.set_normalize(false);
  auto raw = (*CreateWith(options))->Load();
  options.set_normalize(true);
  auto normalised = (*CreateWith(options))->Load();
  ASSERT_TRUE(raw.ok() && normalised.ok());
  // Bytes / 255: train record 1's red plane is 11, every record's red (0, 0) is 255.
  EXPECT_FLOAT_EQ(raw->train.x[1][0][2][2].item<float>(), 11 / 255.0f);
  EXPECT_FLOAT_EQ(raw->train.x.max().item<float>(), 1.0f);
  EXPECT_GE(raw->train.x.min().item<float>(), 0.0f);
  // Normalised is exactly that, per channel, with CINIC-10's mean and std.
  const at::Tensor mean = at::tensor({0.47889522f, 0.47227842f, 0.43047404f}).view({1, 3, 1, 1});
  const at::Tensor std = at::tensor({0.24205776f, 0.23828046f, 0.25874835f}).view({1, 3, 1, 1});
  for (const auto& [plain, scaled] : {std::make_pair(raw->train.x, normalised->train.x),
                                      std::make_pair(raw->test.x, normalised->test.x)}) {
    EXPECT_TRUE(at::allclose(scaled, (plain - mean) / std, 1e-5, 1e-6));
    EXPECT_LT(scaled.min().item<float>(), -1.0f);  // out of [0, 1]
  }
}

TEST(Cinic10Test, AugmentationOptionsReachTheDatasetsInfo) {
  fedkit::data::Cinic10Options options;
  options.mutable_augmentation()->set_crop_padding(3);
  options.mutable_augmentation()->set_horizontal_flip(true);
  options.mutable_augmentation()->set_per_batch(true);
  auto dataset = CreateWith(options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const fl::ImageAugmentation augmentation = (*dataset)->info().train_augmentation;
  EXPECT_EQ(augmentation.crop_padding, 3);
  EXPECT_TRUE(augmentation.horizontal_flip);
  EXPECT_TRUE(augmentation.per_batch);
  EXPECT_FALSE(
      CreateWith(fedkit::data::Cinic10Options()).value()->info().train_augmentation.enabled());

  options.mutable_augmentation()->set_crop_padding(-3);
  EXPECT_EQ(std::string(CreateWith(options).status().message()),
            "options.augmentation.crop_padding: must be >= 0, got -3");
}

TEST(Cinic10Test, MissingAndTruncatedFilesAreErrors) {
  const std::string dir = TestDir("no_valid");
  WriteFile(dir + "/train.bin", CifarRecord("\x01", 0));
  WriteFile(dir + "/test.bin", CifarRecord("\x01", 0));
  // valid.bin is needed only when training on it.
  EXPECT_TRUE(Create(dir, false)->CheckAvailable().ok());
  absl::Status status = Create(dir, true)->CheckAvailable();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(status.message()),
            "dataset (cinic10): missing " + dir +
                "/valid.bin. Convert the CINIC-10 PNG release to CIFAR-10-format binaries (the "
                "script in data/cinic10/cinic10.cc) and put them in " +
                dir + ", or set options.dir to their folder");

  const std::string broken = MakeFixture("truncated");
  fixtures::Truncate(broken + "/train.bin", 3072);
  EXPECT_EQ(std::string(Create(broken, false)->Load().status().message()),
            broken +
                "/train.bin: 3074 bytes is not a whole number of 3073-byte CINIC-10 records "
                "(truncated, or not a CINIC-10 binary file)");
}

}  // namespace
}  // namespace data
