// pFedMe's local step against Algorithm 1 of the paper, by hand: K gradient
// steps on the personalised theta, then w moved towards it; w uploaded, theta
// kept as the client's personal model.

#include "aggregators/common/personal_step_fixture.h"
#include "aggregators/pfedme/pfedme_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/local_trainer.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::testing::HasSubstr;

class PFedMeTest : public PersonalStepTest {};

TEST_F(PFedMeTest, ThetaSolvesTheEnvelopeAndWMovesTowardsIt) {
  const double lambda = 2, p_lr = 0.1, eta = 0.05;
  const int k_steps = 2;
  spec_.set_steps(2);
  spec_.mutable_optimizer()->set_lr(eta);
  fedkit::aggregators::PFedMeHookOptions options;
  options.set_lambda(lambda);
  options.set_personal_steps(k_steps);
  options.set_personal_learning_rate(p_lr);
  const fl::RoundPlan plan = Plan("pfedme", options);
  const fl::LocalTrainer trainer(spec_, {}, &store_);
  const fl::ModelState global = LinearState({0.3f, -0.2f, 0.1f, 0.4f}, {0.05f, -0.05f});
  auto update = trainer.Train(model_, Input(1, global, plan));
  ASSERT_TRUE(update.ok()) << update.status();
  store_.Commit(0);

  fl::ModelState theta = global.Clone();
  fl::ModelState w = global.Clone();
  for (int step = 0; step < 2; ++step) {
    for (int k = 0; k < k_steps; ++k) {
      const fl::ModelState g = FromTensors(Gradient(theta));
      theta = Combine({{1 - p_lr * lambda, theta}, {-p_lr, g}, {p_lr * lambda, w}});
    }
    w = Combine({{1 - eta * lambda, w}, {eta * lambda, theta}});
  }
  ExpectNear(update->delta, Combine({{1, w}, {-1, global}}), "the update");
  ExpectNear(Personal(), theta, "the personal model");
  EXPECT_EQ(update->local_steps, 2);
}

TEST(PFedMeAggregatorTest, DeclaresItsShapeAndNamesBadOptions) {
  auto created = fl::Registry<fl::Aggregator>::Global().Create("pfedme", google::protobuf::Any());
  ASSERT_TRUE(created.ok()) << created.status();
  const fl::AggregatorProperties properties = (*created)->properties();
  EXPECT_TRUE(properties.personal_model);
  EXPECT_TRUE(properties.own_local_step);
  EXPECT_THAT(properties.client_hooks, ::testing::ElementsAre("pfedme"));

  fedkit::aggregators::PFedMeOptions options;
  options.mutable_client()->set_lambda(0);
  options.mutable_client()->set_personal_steps(0);
  options.mutable_client()->set_personal_learning_rate(-1);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto bad = fl::Registry<fl::Aggregator>::Global().Create("pfedme", any);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("options.client.lambda: must be > 0, got 0"));
  EXPECT_THAT(bad.status().message(), HasSubstr("options.client.personal_steps"));
  EXPECT_THAT(bad.status().message(), HasSubstr("options.client.personal_learning_rate"));
}

}  // namespace
}  // namespace aggregators
