#include <string>

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
