#include <string>

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
