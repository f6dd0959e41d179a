// Ditto's client half against the paper's personal update (Eq. 2, Algorithm 1,
// line 7), by hand on a linear model with full-batch steps:
//   v <- v - eta (grad F_k(v) + lambda (v - w_t)),
// the global model's training left exactly as it is without Ditto, and the
// aggregator's declared shape.

#include <memory>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

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

class Linear : public fl::Model {
 public:
  Linear() {
    weight_ = register_parameter("weight", at::zeros({2, 2}));
    bias_ = register_parameter("bias", at::zeros({2}));
  }
  at::Tensor Forward(const at::Tensor& x) override { return at::linear(x, weight_, bias_); }
  at::Tensor weight_, bias_;
};

fl::ModelState State(std::vector<float> weight, std::vector<float> bias) {
  return fl::ModelState({{"weight", at::tensor(weight).view({2, 2}), false},
                         {"bias", at::tensor(bias), false}});
}

class DittoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    examples_ = {at::tensor({1.0f, 0.5f, -1.0f, 0.2f, 0.3f, -0.8f, -0.4f, 1.2f, 2.0f, 0.1f,
                             -1.5f, -0.3f, 0.7f, 0.9f, -0.2f, -1.1f})
                     .view({8, 2}),
                 at::tensor({0, 1, 0, 1, 0, 1, 1, 0}, at::kLong)};
    for (int64_t i = 0; i < 8; ++i) indices_.push_back(i);
    spec_.set_steps(1);
    spec_.set_batch_size(8);
    spec_.mutable_optimizer()->set_lr(0.5);
  }

  fl::RoundPlan Plan(double lambda, int personal_steps, double personal_lr) {
    fedkit::aggregators::DittoHookOptions options;
    options.set_lambda(lambda);
    options.set_personal_steps(personal_steps);
    options.set_personal_learning_rate(personal_lr);
    fl::RoundPlan plan;
    plan.hooks.push_back({"ditto", {}});
    plan.hooks.back().options.PackFrom(options);
    return plan;
  }

  fl::LocalTrainingInput Input(int round, const fl::ModelState& global, const fl::RoundPlan& plan) {
    fl::LocalTrainingInput input;
    input.client_id = 0;
    input.round = round;
    input.seed = 11;
    input.global = &global;
    input.plan = &plan;
    input.examples = &examples_;
    input.indices = &indices_;
    return input;
  }

  // grad F_k at `state` over all eight examples (mean cross-entropy), [weight, bias].
  std::vector<at::Tensor> Gradient(const fl::ModelState& state) {
    at::Tensor w = state.tensor(0).clone().requires_grad_(true);
    at::Tensor b = state.tensor(1).clone().requires_grad_(true);
    at::cross_entropy_loss(at::linear(examples_.x, w, b), examples_.y).backward();
    return {w.grad(), b.grad()};
  }

  fl::ModelState PersonalModel() {
    fl::ModelState v = State({0, 0, 0, 0}, {0, 0});
    const fl::TensorMap& kept = store_.Committed(0, fl::kPersonalSlot);
    for (auto& entry : v.mutable_entries()) entry.tensor = kept.at(entry.name);
    return v;
  }

  Linear model_;
  fl::Examples examples_;
  std::vector<int64_t> indices_;
  fedkit::ClientTrainingSpec spec_;
  fl::ClientStateStore store_;
};

TEST_F(DittoTest, PersonalStepsFollowTheProximalUpdateAndLeaveGlobalTrainingAlone) {
  const double lambda = 0.5;
  const double eta = 0.3;  // personal_learning_rate, not the client's 0.5
  const fl::RoundPlan plan = Plan(lambda, 1, eta);
  const fl::LocalTrainer trainer(spec_, {}, &store_);

  // Round 1: v starts at w_1, where the proximal term's gradient is zero.
  const fl::ModelState w1 = State({0.3f, -0.2f, 0.1f, 0.4f}, {0.05f, -0.05f});
  ASSERT_TRUE(trainer.Train(model_, Input(1, w1, plan)).ok());
  store_.Commit(0);
  std::vector<at::Tensor> g = Gradient(w1);
  fl::ModelState v1 = State({0, 0, 0, 0}, {0, 0});
  for (size_t i = 0; i < 2; ++i) v1.mutable_tensor(i) = w1.tensor(i) - eta * g[i];
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(PersonalModel().tensor(i).allclose(v1.tensor(i), 0, 1e-6))
        << PersonalModel().tensor(i) << " vs " << v1.tensor(i);
  }

  // Round 2, a new global model w_2: v moves from v_1, pulled towards w_2.
  const fl::ModelState w2 = State({-0.1f, 0.6f, 0.2f, -0.3f}, {0.2f, 0.1f});
  auto update = trainer.Train(model_, Input(2, w2, plan));
  ASSERT_TRUE(update.ok()) << update.status();
  store_.Commit(0);
  g = Gradient(v1);
  for (size_t i = 0; i < 2; ++i) {
    const at::Tensor v2 = v1.tensor(i) - eta * (g[i] + lambda * (v1.tensor(i) - w2.tensor(i)));
    EXPECT_TRUE(PersonalModel().tensor(i).allclose(v2, 0, 1e-6))
        << PersonalModel().tensor(i) << " vs " << v2;
  }

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
  const fl::ModelState w = State({0.3f, -0.2f, 0.1f, 0.4f}, {0.05f, -0.05f});
  const fl::RoundPlan plan = Plan(0.0, 0, 0.0);
  auto update = trainer.Train(model_, Input(1, w, plan));
  ASSERT_TRUE(update.ok()) << update.status();
  store_.Commit(0);
  for (size_t i = 0; i < 2; ++i) {
    const at::Tensor local = w.tensor(i) + update->delta.tensor(i);
    EXPECT_TRUE(PersonalModel().tensor(i).allclose(local, 0, 1e-6))
        << PersonalModel().tensor(i) << " vs " << local;
  }
  EXPECT_GT((PersonalModel().tensor(0) - w.tensor(0)).abs().max().item<float>(), 0.01);
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
