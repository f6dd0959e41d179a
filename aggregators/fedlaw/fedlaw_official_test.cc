// FedLAW's server step against the official code (ZexiLee/ICML-2023-FedLAW) on the
// same client models: testdata/official_step.pt holds a global model, four client
// models, their sizes, a proxy set and what the official fedlaw_optimization and
// fedlaw_generate_global_model made of them (gamma, the lambdas, the new global
// model) under the EXP parameterisation, EXP with SWA, and QUAD, 20 server epochs.
// The proxy set (24 examples) is smaller than a batch (128), so each epoch is one
// full-batch step on both sides and no shuffling order enters. Regenerate with
//   python3 tools/side_by_side/make_fedlaw_fixtures.py --official=<checkout>
//       --out=aggregators/fedlaw/testdata
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/official_fixture.h"
#include "aggregators/fedlaw/fedlaw_options.pb.h"
#include "fl/aggregator.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::FedLawOptions;

std::map<std::string, at::Tensor> ReadFixture() {
  return ReadTensorFixture(FixturePath("aggregators/fedlaw/testdata/official_step.pt"));
}

// fedkit's `mlp` layout (a ReLU between the linear layers in one list), 6-5-3.
class TinyMlp : public fl::Model {
 public:
  TinyMlp() {
    layers_->push_back(torch::nn::Linear(6, 5));
    layers_->push_back(torch::nn::ReLU());
    layers_->push_back(torch::nn::Linear(5, 3));
    register_module("layers", layers_);
  }
  at::Tensor Forward(const at::Tensor& x) override { return layers_->forward(x); }

 private:
  torch::nn::Sequential layers_;
};

const std::vector<std::string> kNames = {"layers.0.weight", "layers.0.bias", "layers.2.weight",
                                         "layers.2.bias"};
constexpr int kClients = 4;

fl::ModelState State(const std::map<std::string, at::Tensor>& tensors, const std::string& prefix) {
  return FixtureState(tensors, prefix, kNames);
}

at::Tensor Flat(const fl::ModelState& state) {
  std::vector<at::Tensor> parts;
  for (const auto& entry : state.entries()) parts.push_back(entry.tensor.flatten());
  return at::cat(parts).to(at::kDouble);
}

struct Result {
  fl::ModelState model;
  double gamma = 0;
  double lambda_entropy = 0;
  double lambda_max = 0;
};

Result RunFedLaw(const FedLawOptions& options, const std::map<std::string, at::Tensor>& fixture) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto fedlaw = fl::Registry<fl::Aggregator>::Global().Create("fedlaw", any);
  EXPECT_TRUE(fedlaw.ok()) << fedlaw.status();
  const fl::Examples proxy{fixture.at("proxy_x"), fixture.at("proxy_y")};
  fl::ServerContext context;
  context.round = 1;
  context.round_seed = 7;
  context.proxy = &proxy;
  context.new_model = [] {
    return absl::StatusOr<std::unique_ptr<fl::Model>>(std::make_unique<TinyMlp>());
  };
  const fl::ModelState global = State(fixture, "global/");
  EXPECT_TRUE((*fedlaw)->Configure(global, context).ok());
  const at::Tensor sizes = fixture.at("client_sizes");
  for (int k = 0; k < kClients; ++k) {
    fl::ClientUpdate update;
    update.client_id = k;
    update.num_examples = sizes[k].item<int64_t>();
    update.delta = fl::ModelState::Difference(State(fixture, absl::StrCat("client", k, "/")), global);
    EXPECT_TRUE((*fedlaw)->Accumulate(std::move(update), context).ok());
  }
  absl::StatusOr<fl::ModelState> next = (*fedlaw)->Finalize(global, context);
  EXPECT_TRUE(next.ok()) << next.status();
  return {*next, context.diagnostics.at("gamma"), context.diagnostics.at("lambda_entropy"),
          context.diagnostics.at("lambda_max")};
}

// The lambdas fedkit used, read back from its model: next = gamma * sum_i lambda_i
// theta_i, so next / gamma is an exact combination of the four client models (48
// equations, 4 unknowns), solved by least squares.
std::vector<double> LambdasOf(const Result& result,
                              const std::map<std::string, at::Tensor>& fixture) {
  std::vector<at::Tensor> columns;
  for (int k = 0; k < kClients; ++k) {
    columns.push_back(Flat(State(fixture, absl::StrCat("client", k, "/"))));
  }
  const at::Tensor thetas = at::stack(columns, 1);                    // [P, N]
  const at::Tensor target = (Flat(result.model) / result.gamma).unsqueeze(1);  // [P, 1]
  const at::Tensor lambda = std::get<0>(at::linalg_lstsq(thetas, target)).squeeze(1);
  return std::vector<double>(lambda.data_ptr<double>(), lambda.data_ptr<double>() + kClients);
}

// Tolerances. Both sides run 20 Adam steps from the same start on the same full-batch
// loss in float32; they differ in how the combined model is summed (the code sums
// gamma lambda_i theta_i, fedkit gamma (base + sum_i lambda_i delta_i)) and in the
// chain rule (autograd through softmax in float32, against N + 1 dot products in
// float64): float32 rounding only. Measured with both tolerances at 0: gamma and the
// lambdas differ by at most 7.4e-8, weights (of size ~1) by at most 1.5e-7 (one or
// two float32 ulps). 1e-6 leaves a margin of about ten and stays far below what a
// wrong Adam constant, schedule or start moves them (beta1 0.9 for 0.5 moves gamma by 7e-4 to 2e-2).
constexpr double kScalarTolerance = 1e-6;
constexpr double kWeightTolerance = 1e-6;

void ExpectMatchesOfficial(const std::string& variant, const FedLawOptions& options) {
  SCOPED_TRACE(variant);
  const auto fixture = ReadFixture();
  const Result result = RunFedLaw(options, fixture);
  const double official_gamma = fixture.at(variant + "/gamma").item<double>();
  EXPECT_NEAR(result.gamma, official_gamma, kScalarTolerance);

  const at::Tensor official_lambda = fixture.at(variant + "/lambda");
  const std::vector<double> lambda = LambdasOf(result, fixture);
  double entropy = 0;
  for (int k = 0; k < kClients; ++k) {
    const double expected = official_lambda[k].item<double>();
    EXPECT_NEAR(lambda[k], expected, kScalarTolerance) << "lambda of client " << k;
    entropy -= expected * std::log(expected);
  }
  EXPECT_NEAR(result.lambda_entropy, entropy, kScalarTolerance);
  EXPECT_NEAR(result.lambda_max, official_lambda.max().item<double>(), kScalarTolerance);

  const fl::ModelState official = State(fixture, variant + "/");
  for (size_t i = 0; i < kNames.size(); ++i) {
    const double difference =
        (result.model.tensor(i) - official.tensor(i)).abs().max().item<double>();
    EXPECT_LE(difference, kWeightTolerance)
        << kNames[i] << "\nfedkit:   " << result.model.tensor(i).flatten()
        << "\nofficial: " << official.tensor(i).flatten();
  }
}

FedLawOptions CodeOptions() {
  FedLawOptions options;  // defaults: the code's (lr 0.005, betas 0.5/0.999, Es 20)
  options.set_server_epochs(20);
  options.set_client_holdout_fraction(0);
  return options;
}

TEST(FedLawOfficialTest, ExpParameterisation) {
  FedLawOptions options = CodeOptions();
  options.set_parameterization(FedLawOptions::EXP);
  ExpectMatchesOfficial("exp", options);
}

TEST(FedLawOfficialTest, ExpWithSwa) {
  FedLawOptions options = CodeOptions();
  options.set_parameterization(FedLawOptions::EXP);
  options.set_swa(true);
  ExpectMatchesOfficial("exp_swa", options);
}

TEST(FedLawOfficialTest, QuadParameterisation) {
  FedLawOptions options = CodeOptions();
  options.set_parameterization(FedLawOptions::QUAD);
  ExpectMatchesOfficial("quad", options);
}

}  // namespace
}  // namespace aggregators
