#include <string>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "data/cifar10/cifar10_options.pb.h"
#include "data/test_fixtures.h"
#include "fl/dataset.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::data::fixtures::CifarRecord;
using ::data::fixtures::TestDir;
using ::data::fixtures::WriteFile;

// data_batch_k.bin holds two records labelled k - 1 and k (red planes 10k, 10k + 1);
// test_batch.bin holds three labelled 9, 0, 5.
std::string MakeFixture(const std::string& name) {
  const std::string dir = TestDir(name);
  for (int k = 1; k <= 5; ++k) {
    WriteFile(
        absl::StrCat(dir, "/data_batch_", k, ".bin"),
        CifarRecord(std::string(1, k - 1), 10 * k) + CifarRecord(std::string(1, k), 10 * k + 1));
  }
  WriteFile(dir + "/test_batch.bin",
            CifarRecord("\x09", 7) + CifarRecord(std::string(1, '\0'), 8) + CifarRecord("\x05", 9));
  return dir;
}

absl::StatusOr<std::unique_ptr<fl::Dataset>> Create(const fedkit::data::Cifar10Options& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Dataset>::Global().Create("cifar10", any);
}

fedkit::data::Cifar10Options InDir(const std::string& dir) {
  fedkit::data::Cifar10Options options;
  options.set_dir(dir);
  return options;
}

TEST(Cifar10Test, ReadsTheFiveBatchesInOrderNormalised) {
  auto dataset = *Create(InDir(MakeFixture("loads")));
  ASSERT_TRUE(dataset->CheckAvailable().ok());
  auto splits = dataset->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(dataset->info().input_shape, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(dataset->info().num_classes, 10);
  EXPECT_EQ(splits->train.x.sizes(), (std::vector<int64_t>{10, 3, 32, 32}));
  EXPECT_TRUE(at::equal(splits->train.y, at::tensor({0, 1, 1, 2, 2, 3, 3, 4, 4, 5}, at::kLong)));
  EXPECT_TRUE(at::equal(splits->test.y, at::tensor({9, 0, 5}, at::kLong)));
  // Record 5 is data_batch_3's first: red 30, so green 31.
  EXPECT_NEAR(splits->train.x[4][1][7][7].item<float>(), (31 / 255.0 - 0.4822) / 0.2435, 1e-5);
  EXPECT_NEAR(splits->train.x[4][0][0][0].item<float>(), (1.0 - 0.4914) / 0.2470, 1e-5);
  EXPECT_NEAR(splits->test.x[2][2][31][0].item<float>(), (11 / 255.0 - 0.4465) / 0.2616, 1e-5);
}

TEST(Cifar10Test, NormalizeFalseAndLimits) {
  fedkit::data::Cifar10Options options = InDir(MakeFixture("limits"));
  options.set_normalize(false);
  options.set_train_limit(3);
  options.set_test_limit(1);
  auto splits = (*Create(options))->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train.size(), 3);
  EXPECT_EQ(splits->test.size(), 1);
  EXPECT_FLOAT_EQ(splits->train.x[2][0][1][0].item<float>(), 20 / 255.0f);
}

TEST(Cifar10Test, MissingFilesNameWhereTheyMustGo) {
  const std::string dir = TestDir("partial");
  WriteFile(dir + "/data_batch_1.bin", CifarRecord("\x01", 0));
  WriteFile(dir + "/data_batch_2.bin", CifarRecord("\x01", 0));
  auto dataset = *Create(InDir(dir));
  absl::Status status = dataset->CheckAvailable();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(status.message()),
            "dataset (cifar10): missing " + dir + "/data_batch_3.bin, " + dir +
                "/data_batch_4.bin, " + dir + "/data_batch_5.bin, " + dir +
                "/test_batch.bin. Extract the CIFAR-10 binary version (cifar-10-binary.tar.gz) so "
                "that its cifar-10-batches-bin folder is " +
                dir + ", or set options.dir to that folder");
  EXPECT_EQ(dataset->Load().status(), status);
}

TEST(Cifar10Test, DefaultFolderIsUnderTheDataRoot) {
  setenv("FEDKIT_DATA_DIR", "/data-root", 1);
  auto dataset = *Create(fedkit::data::Cifar10Options());
  unsetenv("FEDKIT_DATA_DIR");
  EXPECT_EQ(
      std::string(dataset->CheckAvailable().message())
          .rfind("dataset (cifar10): missing /data-root/cifar-10-batches-bin/data_batch_1.bin, ",
                 0),
      0u);
}

TEST(Cifar10Test, TruncatedFileAndBadLabelAreErrorsNamingTheFile) {
  const std::string dir = MakeFixture("broken");
  fixtures::Truncate(dir + "/data_batch_4.bin", 100);
  EXPECT_EQ(std::string((*Create(InDir(dir)))->Load().status().message()),
            dir +
                "/data_batch_4.bin: 6046 bytes is not a whole number of 3073-byte CIFAR-10 "
                "records (truncated, or not a CIFAR-10 binary file)");
  const std::string bad = MakeFixture("bad_label");
  WriteFile(bad + "/test_batch.bin", CifarRecord("\x03", 0) + CifarRecord("\x0a", 0));
  EXPECT_EQ(std::string((*Create(InDir(bad)))->Load().status().message()),
            bad +
                "/test_batch.bin: record 1: label byte 0 is 10, out of [0, 9] (not a CIFAR-10 "
                "binary file?)");
}

TEST(Cifar10Test, NegativeLimitsAreReportedTogether) {
  fedkit::data::Cifar10Options options;
  options.set_train_limit(-1);
  options.set_test_limit(-2);
  EXPECT_EQ(std::string(Create(options).status().message()),
            "options.train_limit: must be >= 0, got -1\noptions.test_limit: must be >= 0, got -2");
}

TEST(Cifar10Test, AugmentationOptionsReachTheTrainerThroughInfo) {
  fedkit::data::Cifar10Options options;
  options.mutable_augmentation()->set_crop_padding(4);
  options.mutable_augmentation()->set_horizontal_flip(true);
  auto dataset = Create(options);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  const fl::ImageAugmentation augmentation = (*dataset)->info().train_augmentation;
  EXPECT_EQ(augmentation.crop_padding, 4);
  EXPECT_TRUE(augmentation.horizontal_flip);
  EXPECT_FALSE(augmentation.per_batch);
  EXPECT_FALSE(Create(fedkit::data::Cifar10Options()).value()->info().train_augmentation.enabled());

  options.mutable_augmentation()->set_crop_padding(-1);
  EXPECT_EQ(Create(options).status().message(),
            "options.augmentation.crop_padding: must be >= 0, got -1");
}

}  // namespace
}  // namespace data
