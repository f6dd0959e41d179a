// Per-FedAvg's local step against Algorithm 1 of the paper, by hand, both
// variants: an adaptation step, then the meta-step at the adapted model, with
// (HF) the Hessian-vector correction by a central difference, itself checked
// against the exact product.

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "aggregators/common/personal_step_fixture.h"
#include "aggregators/per_fedavg/per_fedavg_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/local_trainer.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::testing::HasSubstr;
using Options = fedkit::aggregators::PerFedAvgHookOptions;

class PerFedAvgTest : public PersonalStepTest {
 protected:
  fl::ClientUpdate Step(const Options& options) {
    const fl::RoundPlan plan = Plan("per_fedavg", options);
    const fl::LocalTrainer trainer(spec_, {}, &store_);
    auto update = trainer.Train(model_, Input(1, global_, plan));
    EXPECT_TRUE(update.ok()) << update.status();
    return update.ok() ? *std::move(update) : fl::ClientUpdate();
  }

  const double alpha_ = 0.3, beta_ = 0.5;  // beta: the client's learning rate
  const fl::ModelState global_ = LinearState({0.3f, -0.2f, 0.1f, 0.4f}, {0.05f, -0.05f});
};

TEST_F(PerFedAvgTest, FirstOrderStepsFromTheAdaptedModelsGradient) {
  Options options;
  options.set_alpha(alpha_);
  const fl::ClientUpdate update = Step(options);
  const fl::ModelState adapted = Combine({{1, global_}, {-alpha_, FromTensors(Gradient(global_))}});
  const fl::ModelState expected = FromTensors(Gradient(adapted));
  ExpectNear(update.delta, Combine({{-beta_, expected}}), "the update");
  EXPECT_TRUE(store_.Committed(0, fl::kPersonalSlot).empty()) << "nothing is personal";
}

TEST_F(PerFedAvgTest, HessianFreeCorrectsByTheCentralDifference) {
  const double delta = 0.01;
  Options options;
  options.set_variant(Options::HESSIAN_FREE);
  options.set_alpha(alpha_);
  options.set_delta(delta);
  const fl::ClientUpdate update = Step(options);
  const fl::ModelState adapted = Combine({{1, global_}, {-alpha_, FromTensors(Gradient(global_))}});
  const fl::ModelState g = FromTensors(Gradient(adapted));
  const fl::ModelState plus = FromTensors(Gradient(Combine({{1, global_}, {delta, g}})));
  const fl::ModelState minus = FromTensors(Gradient(Combine({{1, global_}, {-delta, g}})));
  const fl::ModelState hv = Combine({{1 / (2 * delta), plus}, {-1 / (2 * delta), minus}});
  const fl::ModelState step = Combine({{1, g}, {-alpha_, hv}});
  for (size_t i = 0; i < step.size(); ++i) {
    EXPECT_TRUE(update.delta.tensor(i).allclose(-beta_ * step.tensor(i), 0, 1e-5))
        << update.delta.tensor(i) << " vs " << -beta_ * step.tensor(i);
  }

  // The central difference is the Hessian-vector product H(w) g (double
  // backward), to the difference's own accuracy; and it matters: FO differs.
  at::Tensor w = global_.tensor(0).to(at::kDouble).requires_grad_(true);
  at::Tensor b = global_.tensor(1).to(at::kDouble).requires_grad_(true);
  const at::Tensor loss = at::cross_entropy_loss(
      at::linear(examples_.x.to(at::kDouble), w, b), examples_.y);
  const std::vector<at::Tensor> grads = torch::autograd::grad({loss}, {w, b}, {}, true, true);
  const at::Tensor gv = (grads[0] * g.tensor(0).to(at::kDouble)).sum() +
                        (grads[1] * g.tensor(1).to(at::kDouble)).sum();
  const std::vector<at::Tensor> exact = torch::autograd::grad({gv}, {w, b});
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(hv.tensor(i).to(at::kDouble).allclose(exact[i], 1e-3, 1e-4))
        << hv.tensor(i) << " vs " << exact[i];
  }
  const fl::ModelState first_order = Combine({{-beta_, g}});
  EXPECT_GT(Combine({{1, update.delta}, {-1, first_order}}).SquaredNorm(), 1e-8);
}

TEST(PerFedAvgAggregatorTest, DeclaresItsShapeAndNamesBadOptions) {
  auto created =
      fl::Registry<fl::Aggregator>::Global().Create("per_fedavg", google::protobuf::Any());
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE((*created)->properties().personal_model);
  EXPECT_TRUE((*created)->properties().own_local_step);
  fedkit::aggregators::PerFedAvgOptions options;
  options.mutable_client()->set_alpha(0);
  options.mutable_client()->set_delta(-1);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto bad = fl::Registry<fl::Aggregator>::Global().Create("per_fedavg", any);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("options.client.alpha: must be > 0, got 0"));
  EXPECT_THAT(bad.status().message(), HasSubstr("options.client.delta: must be > 0, got -1"));
}

}  // namespace
}  // namespace aggregators
