#include <memory>
#include <string>
#include <utility>

#include <ATen/ATen.h>

#include "data/cifar100/cifar100_options.pb.h"
#include "data/test_fixtures.h"
#include "fl/dataset.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::data::fixtures::CifarRecord;
using ::data::fixtures::TestDir;
using ::data::fixtures::WriteFile;

// Records are (coarse, fine): train (19, 99), (4, 30), (0, 0); test (7, 42).
std::string MakeFixture(const std::string& name) {
  const std::string dir = TestDir(name);
  WriteFile(dir + "/train.bin", CifarRecord("\x13\x63", 1) + CifarRecord("\x04\x1e", 2) +
                                    CifarRecord(std::string(2, '\0'), 3));
  WriteFile(dir + "/test.bin", CifarRecord("\x07\x2a", 4));
  return dir;
}

std::unique_ptr<fl::Dataset> Create(const std::string& dir, bool coarse) {
  fedkit::data::Cifar100Options options;
  options.set_dir(dir);
  options.set_coarse_labels(coarse);
  google::protobuf::Any any;
  any.PackFrom(options);
  return *fl::Registry<fl::Dataset>::Global().Create("cifar100", any);
}

TEST(Cifar100Test, FineLabelsByDefaultNormalised) {
  auto dataset = Create(MakeFixture("fine"), /*coarse=*/false);
  auto splits = dataset->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(dataset->info().num_classes, 100);
  EXPECT_TRUE(at::equal(splits->train.y, at::tensor({99, 30, 0}, at::kLong)));
  EXPECT_EQ(splits->test.y[0].item<int64_t>(), 42);
  EXPECT_EQ(splits->train.x.sizes(), (std::vector<int64_t>{3, 3, 32, 32}));
  // Both label bytes are skipped: record 1's blue plane is 2 + 2.
  EXPECT_NEAR(splits->train.x[1][2][3][3].item<float>(), (4 / 255.0 - 0.4409) / 0.2762, 1e-5);
  EXPECT_NEAR(splits->test.x[0][0][0][1].item<float>(), (4 / 255.0 - 0.5071) / 0.2673, 1e-5);
}

TEST(Cifar100Test, CoarseLabels) {
  auto dataset = Create(MakeFixture("coarse"), /*coarse=*/true);
  auto splits = dataset->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(dataset->info().num_classes, 20);
  EXPECT_TRUE(at::equal(splits->train.y, at::tensor({19, 4, 0}, at::kLong)));
  EXPECT_EQ(splits->test.y[0].item<int64_t>(), 7);
}

absl::StatusOr<std::unique_ptr<fl::Dataset>> CreateWith(
    const fedkit::data::Cifar100Options& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Dataset>::Global().Create("cifar100", any);
}

TEST(Cifar100Test, LimitsKeepTheFirstRecordsOfEachSplit) {
  const std::string dir = MakeFixture("limits");
  WriteFile(dir + "/test.bin", CifarRecord("\x07\x2a", 4) + CifarRecord("\x01\x05", 5));
  fedkit::data::Cifar100Options options;
  options.set_dir(dir);
  options.set_train_limit(2);
  options.set_test_limit(1);
  auto splits = (*CreateWith(options))->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_TRUE(at::equal(splits->train.y, at::tensor({99, 30}, at::kLong))) << splits->train.y;
  EXPECT_EQ(splits->train.x.size(0), 2);
  EXPECT_TRUE(at::equal(splits->test.y, at::tensor({42}, at::kLong))) << splits->test.y;
  EXPECT_EQ(splits->test.x.size(0), 1);

  options.set_train_limit(-1);
  options.set_test_limit(-2);
  EXPECT_EQ(std::string(CreateWith(options).status().message()),
            "options.train_limit: must be >= 0, got -1\noptions.test_limit: must be >= 0, got -2");
}

TEST(Cifar100Test, NormalizeFalseKeepsPixelsInTheUnitRange) {
  const std::string dir = MakeFixture("normalize");
  fedkit::data::Cifar100Options options;
  options.set_dir(dir);
  options.set_normalize(false);
  auto raw = (*CreateWith(options))->Load();
  options.set_normalize(true);
  auto normalised = (*CreateWith(options))->Load();
  ASSERT_TRUE(raw.ok() && normalised.ok());
  // Bytes / 255: record 1's blue plane is 2 + 2, every record's red (0, 0) is 255.
  EXPECT_FLOAT_EQ(raw->train.x[1][2][3][3].item<float>(), 4 / 255.0f);
  EXPECT_FLOAT_EQ(raw->train.x.max().item<float>(), 1.0f);
  EXPECT_GE(raw->train.x.min().item<float>(), 0.0f);
  // Normalised is exactly that, per channel, with CIFAR-100's mean and std.
  const at::Tensor mean = at::tensor({0.5071f, 0.4865f, 0.4409f}).view({1, 3, 1, 1});
  const at::Tensor std = at::tensor({0.2673f, 0.2564f, 0.2762f}).view({1, 3, 1, 1});
  for (const auto& [plain, scaled] : {std::make_pair(raw->train.x, normalised->train.x),
                                      std::make_pair(raw->test.x, normalised->test.x)}) {
    EXPECT_TRUE(at::allclose(scaled, (plain - mean) / std, 1e-5, 1e-6));
    EXPECT_LT(scaled.min().item<float>(), -1.0f);  // out of [0, 1]
  }
}

TEST(Cifar100Test, AugmentationOptionsReachTheDatasetsInfo) {
  fedkit::data::Cifar100Options options;
  options.mutable_augmentation()->set_crop_padding(2);
  options.mutable_augmentation()->set_horizontal_flip(true);
  options.mutable_augmentation()->set_per_batch(true);
  auto dataset = CreateWith(options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const fl::ImageAugmentation augmentation = (*dataset)->info().train_augmentation;
  EXPECT_EQ(augmentation.crop_padding, 2);
  EXPECT_TRUE(augmentation.horizontal_flip);
  EXPECT_TRUE(augmentation.per_batch);
  EXPECT_FALSE(
      CreateWith(fedkit::data::Cifar100Options()).value()->info().train_augmentation.enabled());

  options.mutable_augmentation()->set_crop_padding(-3);
  EXPECT_EQ(std::string(CreateWith(options).status().message()),
            "options.augmentation.crop_padding: must be >= 0, got -3");
}

TEST(Cifar100Test, MissingTruncatedAndOutOfRangeFilesAreErrors) {
  const std::string empty = TestDir("empty");
  EXPECT_EQ(std::string(Create(empty, false)->CheckAvailable().message()),
            "dataset (cifar100): missing " + empty + "/train.bin, " + empty +
                "/test.bin. Extract the CIFAR-100 binary version (cifar-100-binary.tar.gz) so that "
                "its cifar-100-binary folder is " +
                empty + ", or set options.dir to that folder");

  const std::string dir = MakeFixture("broken");
  fixtures::Truncate(dir + "/test.bin", 1);
  EXPECT_EQ(std::string(Create(dir, false)->Load().status().message()),
            dir +
                "/test.bin: 3073 bytes is not a whole number of 3074-byte CIFAR-100 records "
                "(truncated, or not a CIFAR-100 binary file)");
  // A fine label of 100 is out of range even when training on coarse labels.
  WriteFile(dir + "/test.bin", CifarRecord("\x07\x64", 4));
  EXPECT_EQ(std::string(Create(dir, true)->Load().status().message()),
            dir +
                "/test.bin: record 0: label byte 1 is 100, out of [0, 99] (not a CIFAR-100 "
                "binary file?)");
}

}  // namespace
}  // namespace data
