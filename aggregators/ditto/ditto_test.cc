// Ditto's client half against the paper's personal update (Eq. 2, Algorithm 1,
// line 7), by hand on a linear model with full-batch steps:
//   v <- v - eta (grad F_k(v) + lambda (v - w_t)),
// the global model's training left exactly as it is without Ditto, and the
// aggregator's declared shape.

#include <memory>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "aggregators/common/personal_step_fixture.h"
#include "aggregators/ditto/ditto_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/client_state_store.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/personalization.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::testing::HasSubstr;

class DittoTest : public PersonalStepTest {
 protected:
  static fl::RoundPlan DittoPlan(double lambda, int personal_steps, double personal_lr) {
    fedkit::aggregators::DittoHookOptions options;
    options.set_lambda(lambda);
    options.set_personal_steps(personal_steps);
    options.set_personal_learning_rate(personal_lr);
    return Plan("ditto", options);
  }
};

TEST_F(DittoTest, PersonalStepsFollowTheProximalUpdateAndLeaveGlobalTrainingAlone) {
  const double lambda = 0.5;
  const double eta = 0.3;  // personal_learning_rate, not the client's 0.5
  const fl::RoundPlan plan = DittoPlan(lambda, 1, eta);
  const fl::LocalTrainer trainer(spec_, {}, &store_);

  // Round 1: v starts at w_1, where the proximal term's gradient is zero.
  const fl::ModelState w1 = LinearState({0.3f, -0.2f, 0.1f, 0.4f}, {0.05f, -0.05f});
  ASSERT_TRUE(trainer.Train(model_, Input(1, w1, plan)).ok());
  store_.Commit(0);
  const fl::ModelState v1 = Combine({{1, w1}, {-eta, FromTensors(Gradient(w1))}});
  ExpectNear(Personal(), v1, "v after round 1");

  // Round 2, a new global model w_2: v moves from v_1, pulled towards w_2.
  const fl::ModelState w2 = LinearState({-0.1f, 0.6f, 0.2f, -0.3f}, {0.2f, 0.1f});
  auto update = trainer.Train(model_, Input(2, w2, plan));
  ASSERT_TRUE(update.ok()) << update.status();
  store_.Commit(0);
  ExpectNear(Personal(),
             Combine({{1 - eta * lambda, v1}, {-eta, FromTensors(Gradient(v1))}, {eta * lambda, w2}}),
             "v after round 2");

  // The global model's update is the one without Ditto, bit for bit, and v is
  // not in it.
  fl::ClientStateStore plain_store;
  const fl::LocalTrainer plain(spec_, {}, &plain_store);
  const fl::RoundPlan no_plan;
  auto plain_update = plain.Train(model_, Input(2, w2, no_plan));
  ASSERT_TRUE(plain_update.ok()) << plain_update.status();
  ASSERT_EQ(update->delta.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(update->delta.tensor(i).equal(plain_update->delta.tensor(i)));
  }
  EXPECT_EQ(update->bytes_sent, plain_update->bytes_sent);
}

TEST_F(DittoTest, ZeroPersonalStepsTakeTheLocalStepsAndZeroLambdaIsLocalTraining) {
  // lambda 0 and as many steps as local training, at the client's rate: the
  // personal model from w_t is the locally trained model.
  spec_.set_steps(3);
  const fl::LocalTrainer trainer(spec_, {}, &store_);
  const fl::ModelState w = LinearState({0.3f, -0.2f, 0.1f, 0.4f}, {0.05f, -0.05f});
  const fl::RoundPlan plan = DittoPlan(0.0, 0, 0.0);
  auto update = trainer.Train(model_, Input(1, w, plan));
  ASSERT_TRUE(update.ok()) << update.status();
  store_.Commit(0);
  ExpectNear(Personal(), Combine({{1, w}, {1, update->delta}}), "v");
  EXPECT_GT((Personal().tensor(0) - w.tensor(0)).abs().max().item<float>(), 0.01);
}

TEST(DittoAggregatorTest, DeclaresAPersonalModelAndPlansItsHook) {
  fedkit::aggregators::DittoOptions options;
  options.mutable_personal()->set_lambda(1.0);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto ditto = fl::Registry<fl::Aggregator>::Global().Create("ditto", any);
  ASSERT_TRUE(ditto.ok()) << ditto.status();
  const fl::AggregatorProperties properties = (*ditto)->properties();
  EXPECT_TRUE(properties.personal_model);
  EXPECT_TRUE(properties.personal_groups.empty());
  EXPECT_THAT(properties.client_hooks, ::testing::ElementsAre("ditto"));
}

TEST(DittoAggregatorTest, BadOptionsNameTheirField) {
  fedkit::aggregators::DittoOptions options;
  options.mutable_personal()->set_lambda(-1);
  options.mutable_personal()->set_personal_steps(-2);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto ditto = fl::Registry<fl::Aggregator>::Global().Create("ditto", any);
  ASSERT_FALSE(ditto.ok());
  EXPECT_THAT(ditto.status().message(), HasSubstr("options.personal.lambda"));
  EXPECT_THAT(ditto.status().message(), HasSubstr("options.personal.personal_steps"));

  fedkit::aggregators::DittoHookOptions hook;
  hook.set_personal_learning_rate(-0.1);
  any.PackFrom(hook);
  auto created = fl::Registry<fl::ClientHook>::Global().Create("ditto", any);
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(created.status().message(), HasSubstr("options.personal_learning_rate"));
}

}  // namespace
}  // namespace aggregators
