#include <cmath>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "aggregators/common/class_aware_mean.h"
#include "aggregators/maecho/maecho_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using fedkit::aggregators::MaEchoOptions;
using fedkit::aggregators::MaEchoProjectionOptions;

std::unique_ptr<fl::Aggregator> Create(const MaEchoOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("maecho", any);
  EXPECT_TRUE(aggregator.ok()) << aggregator.status();
  return aggregator.ok() ? *std::move(aggregator) : nullptr;
}

at::Tensor Matrix(std::vector<float> values) { return at::tensor(values).view({2, 2}); }

// Global zero; a bias-free hidden layer "h" {2, 2} with projector factor `g`
// (P = I - g g^T) and a classifier "out" {2, 2}.
fl::ClientUpdate Update(at::Tensor hidden, at::Tensor out, at::Tensor g,
                        std::vector<int64_t> counts) {
  fl::ClientUpdate update;
  update.num_examples = 10;
  update.delta = fl::ModelState({{"h", hidden, false}, {"out", out, false}});
  update.extras[kClassCountsExtra] = fl::ModelState({{"counts", at::tensor(counts, at::kLong), false}});
  update.extras["maecho"] = fl::ModelState({{"h", g, false}});
  return update;
}

fl::ModelState RunOnce(const MaEchoOptions& options, std::map<std::string, double>* diagnostics) {
  auto aggregator = Create(options);
  const fl::ModelState global({{"h", at::zeros({2, 2}), false}, {"out", at::zeros({2, 2}), false}});
  fl::ServerContext context;
  // A stand-in "accuracy": the aggregate's hidden entry (1, 1).
  context.test_accuracy = [](const fl::ModelState& state) -> absl::StatusOr<double> {
    return state.tensor(0)[1][1].item<double>();
  };
  auto plan = aggregator->Configure(global, context);
  EXPECT_TRUE(plan.ok()) << plan.status();
  // P_1 = diag(0.5, 1), P_2 = diag(1, 0.5).
  const float s = std::sqrt(0.5f);
  EXPECT_TRUE(aggregator
                  ->Accumulate(Update(Matrix({2, 0, 0, 0}), Matrix({1, 1, 2, 2}),
                                      at::tensor({s, 0.0f}).view({2, 1}), {5, 0}),
                               context)
                  .ok());
  EXPECT_TRUE(aggregator
                  ->Accumulate(Update(Matrix({0, 0, 0, 4}), Matrix({3, 3, 4, 4}),
                                      at::tensor({0.0f, s}).view({2, 1}), {5, 5}),
                               context)
                  .ok());
  auto result = aggregator->Finalize(global, context);
  EXPECT_TRUE(result.ok()) << result.status();
  *diagnostics = context.diagnostics;
  return result.ok() ? *result : fl::ModelState();
}

// One iteration with step 1 and alpha = 1/2, by hand:
//   W0 = (V1 + V2) / 2 = [[1, 0], [0, 2]]
//   (W0 - V1)(P1 - I) = [[-1, 0], [0, 2]] diag(-0.5, 0) = [[0.5, 0], [0, 0]]
//   (W0 - V2)(P2 - I) = [[1, 0], [0, -2]] diag(0, -0.5) = [[0, 0], [0, 1]]
//   D = ([[0.5, 0], [0, 0]] + [[0, 0], [0, 1]]) / 2,  W1 = W0 + D = [[1.25, 0], [0, 2.5]]
//   V1 += (W1 - V1) P1 = [[-0.75, 0], [0, 2.5]] diag(0.5, 1) -> [[1.625, 0], [0, 2.5]]
//   V2 += (W1 - V2) P2 = [[1.25, 0], [0, -1.5]] diag(1, 0.5) -> [[1.25, 0], [0, 3.25]]
// Output: the mean of the V_i, [[1.4375, 0], [0, 2.875]] (or W1 with ANCHOR). The
// classifier: class 0 held by both, (1 + 3) / 2 = 2; class 1 by the second only, 4.
// Objective at the start: |[[-0.5, 0], [0, 0]]|^2 + |[[0, 0], [0, -1]]|^2 = 1.25.
TEST(MaEchoTest, OneIterationByHand) {
  MaEchoOptions options;
  options.set_iterations(1);
  options.set_step(1.0);
  std::map<std::string, double> diagnostics;
  const fl::ModelState result = RunOnce(options, &diagnostics);
  ASSERT_EQ(result.size(), 2u);
  EXPECT_TRUE(at::allclose(result.tensor(0), Matrix({1.4375, 0, 0, 2.875})));
  EXPECT_TRUE(at::allclose(result.tensor(1), Matrix({2, 2, 4, 4})));
  EXPECT_DOUBLE_EQ(diagnostics.at("objective_start"), 1.25);
  // W1 against the original models: (W1 - V1)(I - P1) = [[-0.375, 0], [0, 0]],
  // (W1 - V2)(I - P2) = [[0, 0], [0, -0.75]].
  EXPECT_NEAR(diagnostics.at("objective_end"), 0.375 * 0.375 + 0.75 * 0.75, 1e-6);

  options.set_output(MaEchoOptions::ANCHOR);
  EXPECT_TRUE(at::allclose(RunOnce(options, &diagnostics).tensor(0), Matrix({1.25, 0, 0, 2.5})));
}

// With the QP's weights: Z1 = (W0 - V1)(P1 - I) = [[0.5, 0], [0, 0]] and Z2 =
// [[0, 0], [0, 1]] are orthogonal, so A = diag(0.25, 1) and (bound 1) alpha =
// (0.8, 0.2): D = [[0.4, 0], [0, 0.2]], W1 = [[1.4, 0], [0, 2.2]].
TEST(MaEchoTest, QpWeightsOneIterationByHand) {
  MaEchoOptions options;
  options.set_iterations(1);
  options.set_step(1.0);
  options.set_output(MaEchoOptions::ANCHOR);
  options.set_weights(MaEchoOptions::QP);
  options.set_qp_bound(1.0);
  std::map<std::string, double> diagnostics;
  EXPECT_TRUE(at::allclose(RunOnce(options, &diagnostics).tensor(0), Matrix({1.4, 0, 0, 2.2}),
                           1e-5, 1e-6));
  // The code's bound 0.5 with two clients leaves only alpha = (0.5, 0.5): uniform.
  options.set_qp_bound(0.5);
  EXPECT_TRUE(at::allclose(RunOnce(options, &diagnostics).tensor(0), Matrix({1.25, 0, 0, 2.5}),
                           1e-5, 1e-6));
}

TEST(MaEchoTest, TracesTheObjectiveAndTheAggregateAcrossIterations) {
  MaEchoOptions options;
  options.set_iterations(2);
  options.set_step(1.0);
  options.set_trace_every(1);
  options.set_trace_accuracy(true);
  std::map<std::string, double> diagnostics;
  const fl::ModelState result = RunOnce(options, &diagnostics);
  // After iteration 1 the clients' mean has 2.875 at (1, 1) (OneIterationByHand).
  EXPECT_DOUBLE_EQ(diagnostics.at("accuracy_iter_001"), 2.875);
  EXPECT_DOUBLE_EQ(diagnostics.at("accuracy_iter_002"), result.tensor(0)[1][1].item<double>());
  EXPECT_NEAR(diagnostics.at("objective_iter_001"), 0.375 * 0.375 + 0.75 * 0.75, 1e-6);
  EXPECT_DOUBLE_EQ(diagnostics.at("objective_iter_002"), diagnostics.at("objective_end"));
}

TEST(MaEchoTest, RowNormalisationDividesEachMoveByItsNorm) {
  MaEchoOptions options;
  options.set_iterations(1);
  options.set_step(1.0);
  options.set_normalize_rows(true);
  std::map<std::string, double> diagnostics;
  // U1 = [[-0.375, 0], [0, 2.5]] -> rows [-1, 0], [0, 1]; V1 -> [[1, 0], [0, 1]].
  // U2 = [[1.25, 0], [0, -0.75]] -> rows [1, 0], [0, -1]; V2 -> [[1, 0], [0, 3]].
  const fl::ModelState result = RunOnce(options, &diagnostics);
  EXPECT_TRUE(at::allclose(result.tensor(0), Matrix({1, 0, 0, 2})));
}

TEST(MaEchoTest, OtAlignmentMatchesAPermutedCopyBeforeIterating) {
  // Client B is client A with its two hidden neurons swapped: the same function.
  const at::Tensor g = at::tensor({0.6f, 0.2f}).view({2, 1});
  auto run = [&](MaEchoOptions::Alignment align) {
    MaEchoOptions options;
    options.set_iterations(3);
    options.set_align(align);
    auto aggregator = Create(options);
    const fl::ModelState global({{"h", at::zeros({2, 2}), false}, {"out", at::zeros({2, 2}), false}});
    fl::ServerContext context;
    EXPECT_TRUE(aggregator->Configure(global, context).ok());
    EXPECT_TRUE(aggregator->Accumulate(Update(Matrix({1, 2, 3, 4}), Matrix({5, 6, 7, 8}), g, {5, 5}),
                                       context).ok());
    EXPECT_TRUE(aggregator->Accumulate(Update(Matrix({3, 4, 1, 2}), Matrix({6, 5, 8, 7}), g, {5, 5}),
                                       context).ok());
    auto result = aggregator->Finalize(global, context);
    EXPECT_TRUE(result.ok()) << result.status();
    return *result;
  };
  const fl::ModelState aligned = run(MaEchoOptions::OT);
  EXPECT_TRUE(at::allclose(aligned.tensor(0), Matrix({1, 2, 3, 4})));
  EXPECT_TRUE(at::allclose(aligned.tensor(1), Matrix({5, 6, 7, 8})));
  EXPECT_FALSE(at::allclose(run(MaEchoOptions::NONE).tensor(0), Matrix({1, 2, 3, 4})));
}

TEST(MaEchoTest, MinClassExamplesDecidesWhichClientsHoldAClassifierRow) {
  // Each classifier row is averaged over the clients holding its class. Client A
  // has 1 example of class 1, B 5: the default threshold 2 leaves row 1 to B,
  // (4, 4); threshold 1 counts A too, ((2, 2) + (4, 4)) / 2. Both hold class 0.
  const float s = std::sqrt(0.5f);
  for (auto [threshold, row1] :
       std::vector<std::pair<std::optional<int>, float>>{{std::nullopt, 4.0f}, {1, 3.0f}}) {
    MaEchoOptions options;
    options.set_iterations(1);
    if (threshold.has_value()) options.set_min_class_examples(*threshold);
    auto aggregator = Create(options);
    const fl::ModelState global({{"h", at::zeros({2, 2}), false}, {"out", at::zeros({2, 2}), false}});
    fl::ServerContext context;
    ASSERT_TRUE(aggregator->Configure(global, context).ok());
    ASSERT_TRUE(aggregator
                    ->Accumulate(Update(Matrix({2, 0, 0, 0}), Matrix({1, 1, 2, 2}),
                                        at::tensor({s, 0.0f}).view({2, 1}), {5, 1}),
                                 context)
                    .ok());
    ASSERT_TRUE(aggregator
                    ->Accumulate(Update(Matrix({0, 0, 0, 4}), Matrix({3, 3, 4, 4}),
                                        at::tensor({0.0f, s}).view({2, 1}), {5, 5}),
                                 context)
                    .ok());
    auto result = aggregator->Finalize(global, context);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(at::allclose(result->tensor(1), Matrix({2, 2, row1, row1})))
        << "min_class_examples " << threshold.value_or(0) << ": " << result->tensor(1);
  }
}

TEST(MaEchoTest, PlansItsHooksWithTheProjectionOptions) {
  MaEchoOptions options;
  options.mutable_projection()->set_shrink(0.25);
  auto aggregator = Create(options);
  fl::ServerContext context;
  auto plan = aggregator->Configure(fl::ModelState({{"out", at::zeros({2, 2}), false}}), context);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->hooks.size(), 2u);
  EXPECT_EQ(plan->hooks[1].name, "maecho");
  MaEchoProjectionOptions sent;
  ASSERT_TRUE(plan->hooks[1].options.UnpackTo(&sent));
  EXPECT_EQ(sent.shrink(), 0.25);
}

TEST(MaEchoTest, RejectsBadOptionsNamingEachField) {
  MaEchoOptions options;
  options.set_iterations(0);
  options.mutable_projection()->set_shrink(1.5);
  google::protobuf::Any any;
  any.PackFrom(options);
  EXPECT_EQ(fl::Registry<fl::Aggregator>::Global().Create("maecho", any).status().message(),
            "options.iterations: must be >= 1, got 0\n"
            "options.projection.shrink: must be in (0, 1], got 1.5");
}

TEST(MaEchoTest, RefusesAnUpdateWhoseProjectionDoesNotFitTheLayer) {
  auto aggregator = Create(MaEchoOptions());
  const fl::ModelState global({{"h", at::zeros({2, 2}), false}, {"out", at::zeros({2, 2}), false}});
  fl::ServerContext context;
  ASSERT_TRUE(aggregator->Configure(global, context).ok());
  absl::Status status = aggregator->Accumulate(
      Update(Matrix({0, 0, 0, 0}), Matrix({0, 0, 0, 0}), at::zeros({3, 1}), {2, 2}), context);
  EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("expected \"h\" with 2 rows"));
}

// Runs the "maecho" hook on `model` after training on all of `examples`; returns
// what it sends.
absl::StatusOr<fl::ModelState> RunHook(fl::Model& model, const fl::Examples& examples,
                                       int64_t batch_size, const MaEchoProjectionOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto hook = fl::Registry<fl::ClientHook>::Global().Create("maecho", any);
  if (!hook.ok()) return hook.status();
  std::vector<int64_t> indices(examples.size());
  std::iota(indices.begin(), indices.end(), 0);
  fl::HookContext context;
  context.model = &model;
  context.examples = &examples;
  context.client_indices = &indices;
  context.train_indices = &indices;
  context.batch_size = batch_size;
  fl::ClientUpdate update;
  if (absl::Status s = (*hook)->AfterTraining(context, update); !s.ok()) return s;
  return update.extras.at("maecho");
}

// Two linear layers with biases, exposing their inputs.
class TwoLayers : public fl::Model {
 public:
  TwoLayers() {
    w1_ = register_parameter("w1", at::randn({3, 2}));
    b1_ = register_parameter("b1", at::randn({3}));
    w2_ = register_parameter("w2", at::randn({2, 3}));
  }
  at::Tensor Forward(const at::Tensor& x) override {
    return at::linear(at::linear(x, w1_, b1_).relu(), w2_);
  }
  absl::StatusOr<std::vector<LayerInput>> LayerInputs(const at::Tensor& x) override {
    const at::Tensor h = at::linear(x, w1_, b1_).relu();
    return std::vector<LayerInput>{{"w1", "b1", x, {}}, {"w2", "", h, {}}};
  }

 private:
  at::Tensor w1_, b1_, w2_;
};

TEST(MaEchoHookTest, OneBatchIsOneUpdateOnTheMeanInputWithTheBiasInput) {
  torch::manual_seed(4);
  TwoLayers model;
  fl::Examples examples{at::randn({6, 2}), at::zeros({6}, at::kLong)};
  MaEchoProjectionOptions options;
  options.set_shrink(0.5);
  options.set_linear_regularizer(0.1);
  auto hook = fl::Registry<fl::ClientHook>::Global().Create("maecho", google::protobuf::Any());
  ASSERT_TRUE(hook.ok()) << hook.status();
  EXPECT_TRUE((*hook)->planned_only());
  auto sent = RunHook(model, examples, 6, options);
  ASSERT_TRUE(sent.ok()) << sent.status();
  ASSERT_EQ(sent->size(), 1u);  // the classifier w2 is not projected
  EXPECT_EQ(sent->entries()[0].name, "w1|b1");
  // r = [mean x, 1]; P = I - 0.5 r r^T / (0.1 + r.r), so G = sqrt(0.5 / (0.1 + r.r)) r.
  const at::Tensor r = at::cat({examples.x.mean(0), at::ones({1})});
  const at::Tensor g = sent->tensor(0);
  ASSERT_EQ(g.sizes(), (std::vector<int64_t>{3, 1}));
  const at::Tensor expected = at::eye(3) - 0.5 * at::outer(r, r) / (0.1 + at::dot(r, r));
  EXPECT_TRUE(at::allclose(at::eye(3) - at::mm(g, g.t()), expected, 1e-5, 1e-6));
}

TEST(MaEchoHookTest, ComponentsLimitTheFactorsColumns) {
  torch::manual_seed(5);
  TwoLayers model;
  fl::Examples examples{at::randn({8, 2}), at::zeros({8}, at::kLong)};
  MaEchoProjectionOptions options;
  auto full = RunHook(model, examples, 2, options);  // 4 updates in 3 dimensions
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->tensor(0).size(1), 4);  // one column per update
  options.set_components(1);
  auto one = RunHook(model, examples, 2, options);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->tensor(0).sizes(), (std::vector<int64_t>{3, 1}));
}

}  // namespace
}  // namespace aggregators

namespace aggregators {
namespace {

// A 2-channel 3x3 convolution (with bias) on 1x5x5 inputs, then a linear classifier.
class ConvThenLinear : public fl::Model {
 public:
  ConvThenLinear() {
    conv_ = register_parameter("conv_weight", at::randn({2, 1, 3, 3}));
    bias_ = register_parameter("conv_bias", at::randn({2}));
    fc_ = register_parameter("fc_weight", at::randn({2, 2 * 3 * 3}));
  }
  at::Tensor Forward(const at::Tensor& x) override {
    return at::linear(at::conv2d(x, conv_, bias_).relu().flatten(1), fc_);
  }
  absl::StatusOr<std::vector<LayerInput>> LayerInputs(const at::Tensor& x) override {
    const at::Tensor h = at::conv2d(x, conv_, bias_).relu().flatten(1);
    return std::vector<LayerInput>{{"conv_weight", "conv_bias", x, {3, 3}}, {"fc_weight", "", h, {}}};
  }

 private:
  at::Tensor conv_, bias_, fc_;
};

// The code's dense recursion for ConvThenLinear's convolution: P after one update
// per 3x3 window of the 1x5x5 batch-mean map of `x`, windows cut out one by one
// (not by im2col) at `stride` from (0, 0), row by row, each with a constant 1 for
// the bias; shrink c = 0.5 and regulariser `a`.
at::Tensor DenseConvProjector(const at::Tensor& x, int64_t stride, double a) {
  const at::Tensor mean = x.mean(0).to(at::kDouble);
  at::Tensor p = at::eye(10, at::kDouble);
  for (int64_t i = 0; i + 3 <= 5; i += stride) {
    for (int64_t j = 0; j + 3 <= 5; j += stride) {
      const at::Tensor r =
          at::cat({mean[0].narrow(0, i, 3).narrow(1, j, 3).flatten(), at::ones({1}, at::kDouble)})
              .view({-1, 1});
      const at::Tensor k = at::mm(p, r);
      p = p - 0.5 * at::mm(k, k.t()) / (a + at::mm(r.t(), k));
    }
  }
  return p;
}

// I - G G^T of the one projector `sent` holds.
at::Tensor Projector(const fl::ModelState& sent) {
  const at::Tensor g = sent.tensor(0).to(at::kDouble);
  return at::eye(g.size(0), at::kDouble) - at::mm(g, g.t());
}

TEST(MaEchoHookTest, AConvolutionSeesTheWindowsOfTheBatchMeanMap) {
  torch::manual_seed(9);
  ConvThenLinear model;
  fl::Examples examples{at::randn({4, 1, 5, 5}), at::zeros({4}, at::kLong)};
  auto sent = RunHook(model, examples, 4, MaEchoProjectionOptions());
  ASSERT_TRUE(sent.ok()) << sent.status();
  ASSERT_EQ(sent->size(), 1u);
  EXPECT_EQ(sent->entries()[0].name, "conv_weight|conv_bias");
  // The 4 windows of the 5x5 mean map at stride 2, one update each with the
  // defaults c = 0.5, a = 1e-4.
  EXPECT_TRUE(at::allclose(Projector(*sent), DenseConvProjector(examples.x, 2, 1e-4), 1e-4, 1e-5));
}

TEST(MaEchoHookTest, TheWindowStrideSetsWhichWindowsTheProjectorSees) {
  torch::manual_seed(9);
  ConvThenLinear model;
  fl::Examples examples{at::randn({4, 1, 5, 5}), at::zeros({4}, at::kLong)};
  // Stride 1: all 9 windows of the 5x5 map; stride 3: only the one at (0, 0); each
  // window is one update, so one column of G.
  for (auto [stride, windows] : std::vector<std::pair<int, int64_t>>{{1, 9}, {3, 1}}) {
    SCOPED_TRACE(stride);
    MaEchoProjectionOptions options;
    options.set_conv_window_stride(stride);
    auto sent = RunHook(model, examples, 4, options);
    ASSERT_TRUE(sent.ok()) << sent.status();
    EXPECT_EQ(sent->tensor(0).size(1), windows);
    const at::Tensor p = Projector(*sent);
    EXPECT_TRUE(at::allclose(p, DenseConvProjector(examples.x, stride, 1e-4), 1e-4, 1e-5));
    EXPECT_FALSE(at::allclose(p, DenseConvProjector(examples.x, 2, 1e-4), 1e-2, 1e-3));
  }
}

TEST(MaEchoHookTest, ConvRegularizerIsTheConvolutionsA) {
  // Convolutions take a = conv_regularizer (linear layers' 3 does not apply): with
  // a = 0.5 instead of 1e-4 each update k k^T / (a + r.k) removes less, so P stays
  // nearer I (a larger trace).
  torch::manual_seed(9);
  ConvThenLinear model;
  fl::Examples examples{at::randn({4, 1, 5, 5}), at::zeros({4}, at::kLong)};
  MaEchoProjectionOptions options;
  options.set_conv_regularizer(0.5);
  options.set_linear_regularizer(3.0);
  auto sent = RunHook(model, examples, 4, options);
  ASSERT_TRUE(sent.ok()) << sent.status();
  const at::Tensor p = Projector(*sent);
  EXPECT_TRUE(at::allclose(p, DenseConvProjector(examples.x, 2, 0.5), 1e-4, 1e-5));
  const at::Tensor code_default = DenseConvProjector(examples.x, 2, 1e-4);
  EXPECT_FALSE(at::allclose(p, code_default, 1e-2, 1e-3));
  EXPECT_FALSE(at::allclose(p, DenseConvProjector(examples.x, 2, 3.0), 1e-2, 1e-3));
  EXPECT_GT(p.trace().item<double>(), code_default.trace().item<double>());
}

}  // namespace
}  // namespace aggregators
