// The partial-sharing plugins (fedper, lg_fedavg, fedbn), each by its registered
// name: it declares its paper's personal groups (or the given ones) and hands the
// shared part to its base. What the runner does with the groups (kept on the
// clients, never uploaded, each client evaluated with its own) is checked in
// runs by aggregators/personalization_test.cc.

#include <ostream>
#include <string>

#include <ATen/ATen.h>

#include "aggregators/common/partial_sharing_options.pb.h"
#include "aggregators/fedbabu/fedbabu_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::PartialSharingOptions;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Plugin {
  std::string name;
  std::string paper_group;
};

void PrintTo(const Plugin& plugin, std::ostream* os) { *os << plugin.name; }

class PartialSharingTest : public ::testing::TestWithParam<Plugin> {
 protected:
  absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(const PartialSharingOptions& options) {
    google::protobuf::Any any;
    any.PackFrom(options);
    return fl::Registry<fl::Aggregator>::Global().Create(GetParam().name, any);
  }
};

fl::ClientUpdate Update(std::vector<float> delta, int64_t n) {
  fl::ClientUpdate update;
  update.delta = fl::ModelState({{"w", at::tensor(delta), false}});
  update.num_examples = n;
  return update;
}

TEST_P(PartialSharingTest, KeepsThePapersGroupByDefaultOrTheGivenOnes) {
  auto plain = Create({});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT((*plain)->properties().personal_groups, ElementsAre(GetParam().paper_group));
  PartialSharingOptions options;
  options.add_personal_groups("head");
  options.add_personal_groups("norm");
  auto chosen = Create(options);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_THAT((*chosen)->properties().personal_groups, ElementsAre("head", "norm"));
}

TEST_P(PartialSharingTest, TheSharedPartTakesTheBasesStep) {
  // Global shared w = (1, 2); client A (n = 1) delta (4, 0), client B (n = 3)
  // delta (0, -4): FedAvg's w + (1/4)(4, 0) + (3/4)(0, -4) = (2, -1).
  auto aggregator = *Create({});
  fl::ServerContext context;
  context.round = 1;
  const fl::ModelState global({{"w", at::tensor({1.0f, 2.0f}), false}});
  ASSERT_TRUE(aggregator->Configure(global, context).ok());
  ASSERT_TRUE(aggregator->Accumulate(Update({4, 0}, 1), context).ok());
  ASSERT_TRUE(aggregator->Accumulate(Update({0, -4}, 3), context).ok());
  auto next = aggregator->Finalize(global, context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->tensor(0).allclose(at::tensor({2.0f, -1.0f})));
  // Its partial sums are the base's, so it runs across processes and under
  // secure aggregation as FedAvg does.
  EXPECT_TRUE(aggregator->properties().sums_only);
}

TEST_P(PartialSharingTest, PassesOnItsBasesNeedsAndState) {
  PartialSharingOptions options;
  options.mutable_base()->set_name("fedadam");
  auto aggregator = Create(options);
  ASSERT_TRUE(aggregator.ok()) << aggregator.status();
  EXPECT_THAT((*aggregator)->properties().personal_groups, ElementsAre(GetParam().paper_group));
  // FedAdam's moments persist across rounds: a checkpoint must see them.
  fl::ServerContext context;
  context.round = 1;
  const fl::ModelState global({{"w", at::tensor({1.0f, 2.0f}), false}});
  ASSERT_TRUE((*aggregator)->Configure(global, context).ok());
  ASSERT_TRUE((*aggregator)->Accumulate(Update({4, 0}, 1), context).ok());
  ASSERT_TRUE((*aggregator)->Finalize(global, context).ok());
  EXPECT_FALSE((*aggregator)->SaveState().empty());
}

TEST_P(PartialSharingTest, RefusesEmptyOrRepeatedGroupsAndAnUnknownBase) {
  PartialSharingOptions options;
  options.add_personal_groups("body");
  options.add_personal_groups("");
  options.add_personal_groups("body");
  options.mutable_base()->set_name("no_such_aggregator");
  auto aggregator = Create(options);
  ASSERT_FALSE(aggregator.ok());
  EXPECT_THAT(aggregator.status().message(), HasSubstr("options.personal_groups[1]: must not be empty"));
  EXPECT_THAT(aggregator.status().message(),
              HasSubstr("options.personal_groups[2]: \"body\" is also personal_groups[0]"));
  EXPECT_THAT(aggregator.status().message(), HasSubstr("options.base"));
}

TEST(PartialSharingTest, GroupsOfAPartialSharingBaseAddUp) {
  // FedPer over FedBN: the clients keep FedBN's normalisation layers and FedPer's head.
  PartialSharingOptions options;
  options.mutable_base()->set_name("fedbn");
  google::protobuf::Any any;
  any.PackFrom(options);
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("fedper", any);
  ASSERT_TRUE(aggregator.ok()) << aggregator.status();
  EXPECT_THAT((*aggregator)->properties().personal_groups, ElementsAre("norm", "head"));
}

TEST(FedBabuTest, FreezesTheHeadByDefaultAndTrainsNothingItself) {
  auto created = fl::Registry<fl::Aggregator>::Global().Create("fedbabu", {});
  ASSERT_TRUE(created.ok()) << created.status();
  const fl::AggregatorProperties properties = (*created)->properties();
  EXPECT_THAT(properties.frozen_groups, ElementsAre("head"));
  EXPECT_TRUE(properties.personal_groups.empty());
  // The trained part takes FedAvg's step, as for the other plugins.
  fl::ServerContext context;
  context.round = 1;
  const fl::ModelState global({{"w", at::tensor({1.0f, 2.0f}), false}});
  ASSERT_TRUE((*created)->Configure(global, context).ok());
  ASSERT_TRUE((*created)->Accumulate(Update({4, 0}, 1), context).ok());
  ASSERT_TRUE((*created)->Accumulate(Update({0, -4}, 3), context).ok());
  auto next = (*created)->Finalize(global, context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(next->tensor(0).allclose(at::tensor({2.0f, -1.0f})));

  fedkit::aggregators::FedBabuOptions options;
  options.add_frozen_groups("norm");
  options.add_frozen_groups("norm");
  google::protobuf::Any any;
  any.PackFrom(options);
  auto repeated = fl::Registry<fl::Aggregator>::Global().Create("fedbabu", any);
  ASSERT_FALSE(repeated.ok());
  EXPECT_THAT(repeated.status().message(),
              HasSubstr("options.frozen_groups[1]: \"norm\" is also frozen_groups[0]"));
}

INSTANTIATE_TEST_SUITE_P(Plugins, PartialSharingTest,
                         ::testing::Values(Plugin{"fedper", "head"}, Plugin{"lg_fedavg", "body"},
                                           Plugin{"fedbn", "norm"}),
                         [](const ::testing::TestParamInfo<Plugin>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace aggregators
