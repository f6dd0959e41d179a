// APFL's local step against Algorithm 1 of the paper, by hand: w by its own
// gradient, v and alpha by the gradient at the mixed model v_bar, all from the
// previous step's values; w uploaded, v and alpha kept, v_bar the personal model.

#include "aggregators/apfl/apfl_options.pb.h"
#include "aggregators/common/personal_step_fixture.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/local_trainer.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::testing::HasSubstr;

class ApflTest : public PersonalStepTest {
 protected:
  // Client 0 as its last accepted round left it: v and alpha.
  void Keep(const fl::ModelState& v, double alpha) {
    store_.Stage(0, {{"apfl",
                      {{"v/weight", v.tensor(0).clone()},
                       {"v/bias", v.tensor(1).clone()},
                       {"alpha", at::scalar_tensor(alpha, at::kDouble)}}}});
    store_.Commit(0);
  }
};

TEST_F(ApflTest, OneStepMovesWVAndAlphaByThePapersGradients) {
  const double eta = 0.5, eta_alpha = 0.2, alpha = 0.3;
  const fl::ModelState w = LinearState({0.3f, -0.2f, 0.1f, 0.4f}, {0.05f, -0.05f});
  const fl::ModelState v = LinearState({-0.5f, 0.6f, 0.2f, -0.1f}, {0.3f, 0.1f});
  Keep(v, alpha);
  fedkit::aggregators::ApflHookOptions options;
  options.set_alpha_learning_rate(eta_alpha);
  const fl::RoundPlan plan = Plan("apfl", options);
  const fl::LocalTrainer trainer(spec_, {}, &store_);
  auto update = trainer.Train(model_, Input(2, w, plan));
  ASSERT_TRUE(update.ok()) << update.status();
  store_.Commit(0);

  const fl::ModelState mixed = Combine({{alpha, v}, {1 - alpha, w}});
  const fl::ModelState g_w = FromTensors(Gradient(w));
  const fl::ModelState g = FromTensors(Gradient(mixed));
  const double grad_alpha = Combine({{1, v}, {-1, w}}).Dot(g);
  const fl::ModelState v1 = Combine({{1, v}, {-eta * alpha, g}});
  const fl::ModelState w1 = Combine({{1, w}, {-eta, g_w}});
  const double alpha1 = std::clamp(alpha - eta_alpha * grad_alpha, 0.0, 1.0);
  ASSERT_NE(alpha1, alpha);

  ExpectNear(update->delta, Combine({{1, w1}, {-1, w}}), "the update");
  ExpectNear(Personal(), Combine({{alpha1, v1}, {1 - alpha1, w1}}), "the personal model");
  const fl::TensorMap& kept = store_.Committed(0, "apfl");
  EXPECT_NEAR(kept.at("alpha").item<double>(), alpha1, 1e-7);
  ExpectNear(FromTensors({kept.at("v/weight"), kept.at("v/bias")}), v1, "the kept v");

  // A fixed alpha stays where it is.
  Keep(v, alpha);
  options.set_learn_alpha(false);
  const fl::RoundPlan fixed = Plan("apfl", options);
  ASSERT_TRUE(trainer.Train(model_, Input(2, w, fixed)).ok());
  store_.Commit(0);
  EXPECT_EQ(store_.Committed(0, "apfl").at("alpha").item<double>(), alpha);
  ExpectNear(Personal(), Combine({{alpha, v1}, {1 - alpha, w1}}), "the fixed-alpha personal model");
}

TEST(ApflAggregatorTest, DeclaresItsShapeAndNamesBadOptions) {
  auto created = fl::Registry<fl::Aggregator>::Global().Create("apfl", google::protobuf::Any());
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE((*created)->properties().personal_model);
  EXPECT_TRUE((*created)->properties().own_local_step);
  fedkit::aggregators::ApflOptions options;
  options.mutable_client()->set_alpha(1.5);
  options.mutable_client()->set_alpha_learning_rate(-1);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto bad = fl::Registry<fl::Aggregator>::Global().Create("apfl", any);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("options.client.alpha: must be in [0, 1], got 1.5"));
  EXPECT_THAT(bad.status().message(), HasSubstr("options.client.alpha_learning_rate"));
}

}  // namespace
}  // namespace aggregators
