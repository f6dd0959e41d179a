#ifndef AGGREGATORS_COMMON_PERSONAL_STEP_FIXTURE_H_
#define AGGREGATORS_COMMON_PERSONAL_STEP_FIXTURE_H_

// Tests of the personalised methods' client steps against their papers'
// equations, by hand: a linear model on eight examples, full-batch steps (every
// batch is all eight, so each gradient is the full one whatever the order), a
// hook request run through the real LocalTrainer, and the gradient of the mean
// cross-entropy at any weights.

#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "fl/aggregator.h"
#include "fl/client_state_store.h"
#include "fl/dataset.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/model_state.h"
#include "fl/personalization.h"
#include "gtest/gtest.h"

namespace aggregators {

class TinyLinear : public fl::Model {
 public:
  TinyLinear() {
    weight_ = register_parameter("weight", at::zeros({2, 2}));
    bias_ = register_parameter("bias", at::zeros({2}));
  }
  at::Tensor Forward(const at::Tensor& x) override { return at::linear(x, weight_, bias_); }

 private:
  at::Tensor weight_, bias_;
};

// weight {2, 2} and bias {2}.
inline fl::ModelState LinearState(std::vector<float> weight, std::vector<float> bias) {
  return fl::ModelState({{"weight", at::tensor(weight).view({2, 2}), false},
                         {"bias", at::tensor(bias), false}});
}

class PersonalStepTest : public ::testing::Test {
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

  // A round plan with the hook `name` and `options`.
  template <typename Options>
  static fl::RoundPlan Plan(const std::string& name, const Options& options) {
    fl::RoundPlan plan;
    plan.hooks.push_back({name, {}});
    plan.hooks.back().options.PackFrom(options);
    return plan;
  }

  fl::LocalTrainingInput Input(int round, const fl::ModelState& global,
                               const fl::RoundPlan& plan) {
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

  // grad F_k at `state` over the eight examples (mean cross-entropy): [weight, bias].
  std::vector<at::Tensor> Gradient(const fl::ModelState& state) const {
    at::Tensor w = state.tensor(0).clone().requires_grad_(true);
    at::Tensor b = state.tensor(1).clone().requires_grad_(true);
    at::cross_entropy_loss(at::linear(examples_.x, w, b), examples_.y).backward();
    return {w.grad(), b.grad()};
  }

  // sum_i a_i * states_i, entry by entry.
  static fl::ModelState Combine(const std::vector<std::pair<double, fl::ModelState>>& terms) {
    fl::ModelState sum = terms[0].second.ZerosLike();
    for (const auto& [a, state] : terms) sum.Axpy(a, state);
    return sum;
  }
  static fl::ModelState FromTensors(const std::vector<at::Tensor>& tensors) {
    return fl::ModelState({{"weight", tensors[0], false}, {"bias", tensors[1], false}});
  }

  // The client's committed kPersonalSlot as a state.
  fl::ModelState Personal() const {
    fl::ModelState own = LinearState({0, 0, 0, 0}, {0, 0});
    const fl::TensorMap& kept = store_.Committed(0, fl::kPersonalSlot);
    for (auto& entry : own.mutable_entries()) {
      auto it = kept.find(entry.name);
      EXPECT_NE(it, kept.end()) << "no personal " << entry.name;
      if (it != kept.end()) entry.tensor = it->second;
    }
    return own;
  }

  // Expects `actual` within 1e-6 of `expected`, entry by entry.
  static void ExpectNear(const fl::ModelState& actual, const fl::ModelState& expected,
                         const std::string& what) {
    ASSERT_EQ(actual.size(), expected.size()) << what;
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_TRUE(actual.tensor(i).allclose(expected.tensor(i), 0, 1e-6))
          << what << " " << actual.entries()[i].name << ": " << actual.tensor(i) << " vs "
          << expected.tensor(i);
    }
  }

  TinyLinear model_;
  fl::Examples examples_;
  std::vector<int64_t> indices_;
  fedkit::ClientTrainingSpec spec_;
  fl::ClientStateStore store_;
};

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_PERSONAL_STEP_FIXTURE_H_
