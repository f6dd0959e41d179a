#include <random>
#include <string>

#include "data/partitioners/natural/natural_options.pb.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using Shares = std::vector<std::vector<int64_t>>;

std::unique_ptr<fl::Partitioner> Natural(bool take_first_owners = false) {
  fedkit::data::NaturalOptions options;
  if (take_first_owners) options.set_take_first_owners(true);
  google::protobuf::Any any;
  any.PackFrom(options);
  return *fl::Registry<fl::Partitioner>::Global().Create("natural", any);
}

// Owners 7, 3, 9 interleaved; labels irrelevant.
const std::vector<int64_t> kOwners = {7, 3, 7, 9, 3, 3, 9, 7};
const std::vector<int64_t> kLabels(8, 0);

TEST(NaturalTest, OneClientPerOwnerInOwnerIdOrder) {
  std::mt19937_64 rng(1);
  auto shares = Natural()->Partition({kLabels, 1, kOwners}, 3, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  EXPECT_EQ(*shares, (Shares{{1, 4, 5}, {0, 2, 7}, {3, 6}}));
}

TEST(NaturalTest, SeedPlaysNoPart) {
  std::mt19937_64 a(1), b(2);
  EXPECT_EQ(*Natural()->Partition({kLabels, 1, kOwners}, 3, a),
            *Natural()->Partition({kLabels, 1, kOwners}, 3, b));
}

TEST(NaturalTest, FewerClientsThanOwnersNeedsTheOption) {
  std::mt19937_64 rng(1);
  auto refused = Natural()->Partition({kLabels, 1, kOwners}, 2, rng);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(refused.status().message()),
            "num_clients: 2 but the training set has 3 owners; set options.take_first_owners to "
            "use only the first ones");
  auto first_two = Natural(true)->Partition({kLabels, 1, kOwners}, 2, rng);
  ASSERT_TRUE(first_two.ok());
  EXPECT_EQ(*first_two, (Shares{{1, 4, 5}, {0, 2, 7}}));
}

TEST(NaturalTest, MoreClientsThanOwnersIsAnError) {
  std::mt19937_64 rng(1);
  auto shares = Natural(true)->Partition({kLabels, 1, kOwners}, 4, rng);
  EXPECT_EQ(shares.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(shares.status().message()),
            "num_clients: 4 but the training set has 3 owners");
}

TEST(NaturalTest, DatasetWithoutOwnersIsAClearError) {
  std::mt19937_64 rng(1);
  auto shares = Natural()->Partition({kLabels, 1}, 3, rng);
  EXPECT_EQ(shares.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(shares.status().message()),
              ::testing::StartsWith("the dataset provides no owner ids"));
}

TEST(NaturalTest, MisalignedOwnersAreAnError) {
  std::mt19937_64 rng(1);
  const std::vector<int64_t> owners = {1, 2};
  auto shares = Natural()->Partition({kLabels, 1, owners}, 2, rng);
  EXPECT_EQ(std::string(shares.status().message()),
            "the dataset gave 2 owner ids for 8 training examples");
}

}  // namespace
}  // namespace data
