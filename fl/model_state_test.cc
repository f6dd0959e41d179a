#include "fl/model_state.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::HasSubstr;

// A module with two parameters and two buffers (one float, one int64), registered
// interleaved so that the parameters-then-buffers order is not an accident.
class TinyModule : public torch::nn::Module {
 public:
  TinyModule() {
    register_parameter("weight", at::tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2}));
    register_buffer("running_mean", at::tensor({10.0f, 20.0f}));
    register_parameter("bias", at::tensor({0.5f, -0.5f}));
    register_buffer("count", at::tensor(std::vector<int64_t>{7}));
  }
};

// A module like TinyModule whose weight has another shape.
class WideModule : public torch::nn::Module {
 public:
  WideModule() {
    register_parameter("weight", at::zeros({2, 3}));
    register_buffer("running_mean", at::zeros({2}));
    register_parameter("bias", at::zeros({2}));
    register_buffer("count", at::zeros({1}, at::kLong));
  }
};

at::Tensor Floats(std::vector<float> values) { return at::tensor(values); }
at::Tensor Longs(std::vector<int64_t> values) { return at::tensor(values); }

// Parameters w (2 floats) and b (1 float), buffer n (1 int64).
ModelState SmallState(std::vector<float> w, std::vector<float> b, int64_t n) {
  return ModelState({{"w", Floats(w), false}, {"b", Floats(b), false}, {"n", Longs({n}), true}});
}

void ExpectTensorEq(const at::Tensor& actual, const at::Tensor& expected) {
  ASSERT_EQ(actual.scalar_type(), expected.scalar_type());
  ASSERT_TRUE(actual.sizes().equals(expected.sizes()))
      << c10::str(actual.sizes()) << " vs " << c10::str(expected.sizes());
  EXPECT_TRUE(at::equal(actual, expected)) << actual << "\nvs\n" << expected;
}

TEST(ModelStateTest, FromModuleListsParametersThenBuffers) {
  TinyModule module;
  ModelState state = ModelState::FromModule(module);
  ASSERT_EQ(state.size(), 4);
  const auto& e = state.entries();
  EXPECT_EQ(e[0].name, "weight");
  EXPECT_FALSE(e[0].is_buffer);
  EXPECT_EQ(e[1].name, "bias");
  EXPECT_FALSE(e[1].is_buffer);
  EXPECT_EQ(e[2].name, "running_mean");
  EXPECT_TRUE(e[2].is_buffer);
  EXPECT_EQ(e[3].name, "count");
  EXPECT_TRUE(e[3].is_buffer);

  ExpectTensorEq(state.tensor(0), Floats({1, 2, 3, 4}).reshape({2, 2}));
  ExpectTensorEq(state.tensor(1), Floats({0.5f, -0.5f}));
  ExpectTensorEq(state.tensor(2), Floats({10, 20}));
  ExpectTensorEq(state.tensor(3), Longs({7}));
}

// Parameters of norm 5 (3, 4) clipped to 1 become (0.6, 0.8); the buffer stays.
TEST(ModelStateTest, ClipParameterNormScalesParametersOnlyAndOnlyAboveTheBound) {
  ModelState state({{"w", at::tensor({3.0f, 4.0f}), false}, {"b", at::tensor({10.0f}), true}});
  EXPECT_FALSE(state.ClipParameterNorm(5.0));
  EXPECT_TRUE(state.tensor(0).equal(at::tensor({3.0f, 4.0f})));
  EXPECT_TRUE(state.ClipParameterNorm(1.0));
  EXPECT_TRUE(state.tensor(0).allclose(at::tensor({0.6f, 0.8f})));
  EXPECT_TRUE(state.tensor(1).equal(at::tensor({10.0f})));
  // With the norm given, it is used as is: 2 against the bound 1 halves them.
  EXPECT_TRUE(state.ClipParameterNorm(1.0, 2.0));
  EXPECT_TRUE(state.tensor(0).allclose(at::tensor({0.3f, 0.4f})));
}

TEST(ModelStateTest, FromModuleCopiesAreDetached) {
  TinyModule module;
  ModelState state = ModelState::FromModule(module);
  EXPECT_FALSE(state.tensor(0).requires_grad());
  EXPECT_FALSE(state.tensor(1).requires_grad());

  {
    at::NoGradGuard no_grad;
    for (auto& p : module.parameters()) p.fill_(100.0);
    for (auto& b : module.buffers()) b.fill_(100);
  }
  ExpectTensorEq(state.tensor(0), Floats({1, 2, 3, 4}).reshape({2, 2}));
  ExpectTensorEq(state.tensor(1), Floats({0.5f, -0.5f}));
  ExpectTensorEq(state.tensor(2), Floats({10, 20}));
  ExpectTensorEq(state.tensor(3), Longs({7}));

  // And the other way round: changing the state leaves the module alone.
  state.mutable_tensor(0).fill_(-1.0);
  ExpectTensorEq(module.named_parameters()["weight"].detach(),
                 at::full({2, 2}, 100.0f));
}

TEST(ModelStateTest, LoadIntoRoundTrip) {
  TinyModule source;
  {
    at::NoGradGuard no_grad;
    source.named_parameters()["weight"].mul_(3.0);
    source.named_parameters()["bias"].add_(1.0);
    source.named_buffers()["running_mean"].sub_(5.0);
    source.named_buffers()["count"].add_(2);
  }
  ModelState state = ModelState::FromModule(source);

  TinyModule target;
  ASSERT_TRUE(state.LoadInto(target).ok());
  ExpectTensorEq(target.named_parameters()["weight"].detach(),
                 Floats({3, 6, 9, 12}).reshape({2, 2}));
  ExpectTensorEq(target.named_parameters()["bias"].detach(), Floats({1.5f, 0.5f}));
  ExpectTensorEq(target.named_buffers()["running_mean"], Floats({5, 15}));
  ExpectTensorEq(target.named_buffers()["count"], Longs({9}));

  // The loaded parameters are still trainable parameters.
  EXPECT_TRUE(target.named_parameters()["weight"].requires_grad());

  ModelState reloaded = ModelState::FromModule(target);
  ASSERT_EQ(reloaded.size(), state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(reloaded.entries()[i].name, state.entries()[i].name);
    ExpectTensorEq(reloaded.tensor(i), state.tensor(i));
  }
}

TEST(ModelStateTest, LoadIntoRejectsShapeMismatchAndLeavesModuleAlone) {
  TinyModule tiny;
  ModelState state = ModelState::FromModule(tiny);
  WideModule wide;
  absl::Status status = state.LoadInto(wide);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("\"weight\""));
  EXPECT_THAT(status.message(), HasSubstr("expected shape [2, 3], got [2, 2]"));
  // Nothing was copied.
  ExpectTensorEq(wide.named_parameters()["bias"].detach(), at::zeros({2}));
}

TEST(ModelStateTest, LoadIntoRejectsDtypeMismatch) {
  TinyModule module;
  ModelState state = ModelState::FromModule(module);
  state.mutable_tensor(0) = state.tensor(0).to(at::kDouble) + 0.25;
  absl::Status status = state.LoadInto(module);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("expected dtype Float, got Double"));
}

TEST(ModelStateTest, LoadIntoRejectsMissingTensor) {
  TinyModule module;
  ModelState state = ModelState::FromModule(module);
  state.mutable_entries().pop_back();
  absl::Status status = state.LoadInto(module);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("expected 4 tensors, got 3"));
}

TEST(ModelStateTest, CheckSameLayoutAcceptsSameLayoutWithOtherValues) {
  EXPECT_TRUE(SmallState({1, 2}, {3}, 4).CheckSameLayout(SmallState({5, 6}, {7}, 8)).ok());
}

TEST(ModelStateTest, CheckSameLayoutRejectsDifferentCount) {
  ModelState a = SmallState({1, 2}, {3}, 4);
  ModelState b({{"w", Floats({1, 2}), false}});
  absl::Status status = a.CheckSameLayout(b);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("expected 3 tensors, got 1"));
}

TEST(ModelStateTest, CheckSameLayoutRejectsDifferentName) {
  ModelState a = SmallState({1, 2}, {3}, 4);
  ModelState b({{"w", Floats({1, 2}), false}, {"c", Floats({3}), false}, {"n", Longs({4}), true}});
  absl::Status status = a.CheckSameLayout(b);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor 1"));
  EXPECT_THAT(status.message(), HasSubstr("expected \"b\""));
  EXPECT_THAT(status.message(), HasSubstr("got \"c\""));
}

TEST(ModelStateTest, CheckSameLayoutRejectsDifferentBufferFlag) {
  ModelState a = SmallState({1, 2}, {3}, 4);
  ModelState b({{"w", Floats({1, 2}), false}, {"b", Floats({3}), false}, {"n", Longs({4}), false}});
  absl::Status status = a.CheckSameLayout(b);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor 2"));
  EXPECT_THAT(status.message(), HasSubstr("(buffer)"));
}

TEST(ModelStateTest, CheckSameLayoutRejectsDifferentShape) {
  ModelState a = SmallState({1, 2}, {3}, 4);
  ModelState b = SmallState({1, 2}, {3}, 4);
  b.mutable_tensor(0) = Floats({1, 2, 3});
  absl::Status status = a.CheckSameLayout(b);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tensor \"w\": expected shape [2], got [3]"));

  // Same number of elements, other shape.
  ModelState c({{"m", at::zeros({2, 3}), false}});
  ModelState d({{"m", at::zeros({3, 2}), false}});
  EXPECT_THAT(c.CheckSameLayout(d).message(), HasSubstr("expected shape [2, 3], got [3, 2]"));
}

TEST(ModelStateTest, AxpySameAlphaForAll) {
  ModelState y = SmallState({1, 2}, {3}, 10);
  ModelState x = SmallState({4, -2}, {0.5f}, 4);
  y.Axpy(0.5, x);
  ExpectTensorEq(y.tensor(0), Floats({3, 1}));
  ExpectTensorEq(y.tensor(1), Floats({3.25f}));
  ExpectTensorEq(y.tensor(2), Longs({12}));
  // x is untouched.
  ExpectTensorEq(x.tensor(0), Floats({4, -2}));
}

TEST(ModelStateTest, AxpySeparateBufferAlpha) {
  ModelState y({{"w", Floats({1, 2}), false},
                {"mean", Floats({10, 20}), true},
                {"n", Longs({3}), true}});
  ModelState x({{"w", Floats({2, 4}), false},
                {"mean", Floats({4, 8}), true},
                {"n", Longs({2}), true}});
  y.Axpy(/*parameter_alpha=*/2.0, /*buffer_alpha=*/0.25, x);
  ExpectTensorEq(y.tensor(0), Floats({5, 10}));   // 1 + 2*2, 2 + 2*4
  ExpectTensorEq(y.tensor(1), Floats({11, 22}));  // 10 + 0.25*4, 20 + 0.25*8
  ExpectTensorEq(y.tensor(2), Longs({4}));        // round(3 + 0.25*2 = 3.5)
}

TEST(ModelStateTest, AxpyRoundsIntegerBuffers) {
  ModelState y({{"n", Longs({3, 10, -4}), true}});
  ModelState x({{"n", Longs({2, 1, 1}), true}});
  // 3 + 0.3*2 = 3.6 -> 4 (truncation would give 3); 10 + 0.3 = 10.3 -> 10;
  // -4 + 0.3 = -3.7 -> -4.
  y.Axpy(/*parameter_alpha=*/100.0, /*buffer_alpha=*/0.3, x);
  ExpectTensorEq(y.tensor(0), Longs({4, 10, -4}));
  EXPECT_EQ(y.tensor(0).scalar_type(), at::kLong);
}

TEST(ModelStateTest, ScaleFloatsAndRoundsIntegers) {
  ModelState s = SmallState({1, -2}, {0.5f}, 7);
  s.Scale(0.4);
  // float32: 1*0.4, -2*0.4, 0.5*0.4 in float arithmetic.
  ExpectTensorEq(s.tensor(0), Floats({0.4f, -0.8f}));
  ExpectTensorEq(s.tensor(1), Floats({0.2f}));
  ExpectTensorEq(s.tensor(2), Longs({3}));  // round(2.8)

  ModelState t = SmallState({1, 2}, {3}, 5);
  t.Scale(-2.0);
  ExpectTensorEq(t.tensor(0), Floats({-2, -4}));
  ExpectTensorEq(t.tensor(1), Floats({-6}));
  ExpectTensorEq(t.tensor(2), Longs({-10}));
}

TEST(ModelStateTest, DifferenceFromModuleSubtractsTheBaseAndLeavesTheModuleAlone) {
  TinyModule module;
  ModelState base = ModelState::FromModule(module);
  base.Scale(0.5);  // weight (0.5, 1, 1.5, 2), bias (0.25, -0.25), running (5, 10), count 4 (3.5 rounded)
  ModelState d = ModelState::DifferenceFromModule(module, base);
  ASSERT_TRUE(d.CheckSameLayout(base).ok());
  ExpectTensorEq(d.tensor(0), at::tensor({0.5f, 1.0f, 1.5f, 2.0f}).reshape({2, 2}));
  ExpectTensorEq(d.tensor(1), Floats({0.25f, -0.25f}));
  ExpectTensorEq(d.tensor(2), Floats({5, 10}));
  ExpectTensorEq(d.tensor(3), Longs({3}));
  // A new tensor, not a view of the module's.
  d.mutable_tensor(0).zero_();
  ExpectTensorEq(module.named_parameters()["weight"].detach(),
                 at::tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2}));
}

TEST(ModelStateTest, ScaledAndSumMakeNewStates) {
  ModelState a = SmallState({5, 1}, {2}, 9);
  ModelState b = SmallState({2, 3}, {0.5f}, 4);
  ModelState s = a.Scaled(0.5);
  ExpectTensorEq(s.tensor(0), Floats({2.5f, 0.5f}));
  ExpectTensorEq(s.tensor(2), Longs({4}));  // 4.5 rounds to even
  // Parameters (w, b) get alpha 2, the buffer n 10: w (9, 7), b 2 + 1 = 3, n 9 + 40 = 49.
  ModelState sum = ModelState::Sum(a, 2.0, 10.0, b);
  ExpectTensorEq(sum.tensor(0), Floats({9, 7}));
  ExpectTensorEq(sum.tensor(1), Floats({3}));
  ExpectTensorEq(sum.tensor(2), Longs({49}));
  ExpectTensorEq(a.tensor(0), Floats({5, 1}));  // inputs untouched
}

TEST(ModelStateTest, Difference) {
  ModelState a = SmallState({5, 1}, {2}, 9);
  ModelState b = SmallState({2, 3}, {0.5f}, 4);
  ModelState d = ModelState::Difference(a, b);
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d.entries()[0].name, "w");
  EXPECT_EQ(d.entries()[1].name, "b");
  EXPECT_EQ(d.entries()[2].name, "n");
  EXPECT_FALSE(d.entries()[0].is_buffer);
  EXPECT_TRUE(d.entries()[2].is_buffer);
  ExpectTensorEq(d.tensor(0), Floats({3, -2}));
  ExpectTensorEq(d.tensor(1), Floats({1.5f}));
  ExpectTensorEq(d.tensor(2), Longs({5}));
  // The inputs are untouched.
  ExpectTensorEq(a.tensor(0), Floats({5, 1}));
  ExpectTensorEq(b.tensor(0), Floats({2, 3}));
}

TEST(ModelStateTest, DotAndSquaredNormExcludeBuffers) {
  ModelState a({{"w", Floats({1, 2, 3, 4}).reshape({2, 2}), false},
                {"b", Floats({0.5f, -0.5f}), false},
                {"mean", Floats({10, 20}), true},
                {"n", Longs({7}), true}});
  ModelState b({{"w", Floats({1, 1, 1, 1}).reshape({2, 2}), false},
                {"b", Floats({2, 2}), false},
                {"mean", Floats({100, 100}), true},
                {"n", Longs({1}), true}});
  // Parameters: (1+2+3+4) + (1 - 1) = 10. Buffers would add 3000 + 7.
  EXPECT_DOUBLE_EQ(a.Dot(b), 10.0);
  EXPECT_DOUBLE_EQ(b.Dot(a), 10.0);
  // 1 + 4 + 9 + 16 + 0.25 + 0.25.
  EXPECT_DOUBLE_EQ(a.SquaredNorm(), 30.5);
  // 4 * 1 + 2 * 4.
  EXPECT_DOUBLE_EQ(b.SquaredNorm(), 12.0);
}

TEST(ModelStateTest, DotAccumulatesInDouble) {
  // 2^24 squared is 2^48; 2^48 + 1 = 281474976710657 is exact in float64 but
  // would round to 2^48 in float32.
  ModelState a({{"w", Floats({16777216.0f, 1.0f}), false}});
  EXPECT_DOUBLE_EQ(a.SquaredNorm(), 281474976710657.0);
}

TEST(ModelStateTest, LargeDotsStayCloseToTheExactFloat64Sum) {
  // 300,001 entries take the chunked BLAS path; the exact float64 sum is the reference.
  at::manual_seed(3);
  const at::Tensor x = at::randn({300001});
  const at::Tensor y = at::randn({300001}).add_(0.5);
  ModelState a({{"w", x, false}});
  ModelState b({{"w", y, false}});
  const at::Tensor products = x.to(at::kDouble) * y.to(at::kDouble);
  const double exact = products.sum().item<double>();
  // A dot product's rounding error scales with sum |x_i y_i|, not with the
  // (cancelling) result.
  EXPECT_NEAR(a.Dot(b), exact, 1e-7 * products.abs().sum().item<double>());
  const double exact_norm = at::sum(x.to(at::kDouble).pow(2)).item<double>();
  EXPECT_NEAR(a.SquaredNorm(), exact_norm, 1e-7 * exact_norm);
}

TEST(ModelStateTest, AllFinite) {
  EXPECT_TRUE(SmallState({1, 2}, {3}, 4).AllFinite());

  ModelState nan_param = SmallState({1, std::nanf("")}, {3}, 4);
  EXPECT_FALSE(nan_param.AllFinite());

  ModelState inf_param = SmallState({1, 2}, {-std::numeric_limits<float>::infinity()}, 4);
  EXPECT_FALSE(inf_param.AllFinite());

  ModelState inf_buffer({{"w", Floats({1}), false},
                         {"mean", Floats({std::numeric_limits<float>::infinity()}), true}});
  EXPECT_FALSE(inf_buffer.AllFinite());

  EXPECT_TRUE(ModelState().AllFinite());
}

// Regression: finiteness was tested by summing, so 1000 finite values near the
// float maximum overflowed the sum and the update was rejected as non-finite.
TEST(ModelStateTest, LargeFiniteValuesAreFinite) {
  const float big = 0.9f * std::numeric_limits<float>::max();
  ModelState huge({{"w", at::full({1000}, big), false}, {"b", at::full({3}, -big), false}});
  EXPECT_TRUE(huge.AllFinite());
  // A NaN among many finite values, away from either end, is still found.
  at::Tensor w = at::randn({4097});
  w[2000] = std::nanf("");
  EXPECT_FALSE(ModelState({{"w", w, false}}).AllFinite());
}

TEST(ModelStateTest, Sizes) {
  TinyModule module;
  ModelState state = ModelState::FromModule(module);
  // weight 4 + bias 2 + running_mean 2 + count 1.
  EXPECT_EQ(state.NumElements(), 9);
  // 8 float32 * 4 bytes + 1 int64 * 8 bytes.
  EXPECT_EQ(state.NumBytes(), 40);
  // weight and bias only.
  EXPECT_EQ(state.NumParameters(), 6);

  ModelState doubles({{"d", at::zeros({3}, at::kDouble), false}});
  EXPECT_EQ(doubles.NumBytes(), 24);

  EXPECT_EQ(ModelState().NumElements(), 0);
  EXPECT_EQ(ModelState().NumBytes(), 0);
}

TEST(ModelStateTest, ExtraStatesNumBytes) {
  TinyModule module;
  ExtraStates extras;
  EXPECT_EQ(NumBytes(extras), 0);
  extras["control"] = ModelState::FromModule(module);                           // 40 bytes
  extras["sensitivity"] = ModelState({{"d", at::zeros({3}, at::kDouble), false},  // 24 bytes
                                      {"h", at::zeros({2, 2}, at::kHalf), true}});  // 8 bytes
  EXPECT_EQ(NumBytes(extras), 72);
}

TEST(ModelStateTest, CloneIsDeep) {
  ModelState a = SmallState({1, 2}, {3}, 4);
  ModelState b = a.Clone();
  b.mutable_tensor(0).fill_(0.0);
  ExpectTensorEq(a.tensor(0), Floats({1, 2}));
  EXPECT_EQ(b.entries()[2].is_buffer, true);
}

}  // namespace
}  // namespace fl
