// fedkit's fedexp aggregator against the official FedExP code (Divyansh03/FedExP,
// main.py) on the same client updates. The fixture holds four rounds of
// the official main.py, run unchanged on a tiny problem: each round's global
// model, the three sampled clients' updates (from the code's own local training)
// and sizes, and what its server step made of them: eta_g and the quantities it is
// computed from (eps_t, the weighted mean squared update norm A, the squared norm
// of the weighted mean update), the next global model and the model it evaluates
// (the mean of the last two iterates). Rounds 2 and 3 extrapolate (eta_g 1.53 and
// 1.15, with M eps_t about six times ||Delta_bar||^2 in round 2, so eps and its
// decay weigh in); rounds 1 and 4 are held at eta_g = 1 by the max.
//
// Regenerate (from the repository root, with a checkout of the official code):
//   python3 tools/side_by_side/make_server_step_fixtures.py --method=fedexp
//     --official=/path/to/FedExP --out=aggregators/fedexp/testdata

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/official_fixture.h"
#include "aggregators/fedexp/fedexp_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using Options = fedkit::aggregators::FedExpOptions;

std::string Testdata(const std::string& name) {
  return FixturePath("aggregators/fedexp/testdata/" + name);
}

// fedkit's "mlp" with hidden: [3] on 4 inputs and 3 classes, in its parameter order.
const std::vector<std::string> kNames = {"layers.0.weight", "layers.0.bias", "layers.2.weight",
                                         "layers.2.bias"};

fl::ModelState State(const std::map<std::string, at::Tensor>& tensors, const std::string& prefix) {
  return FixtureState(tensors, prefix, kNames);
}

// Both sides compute w + eta_g * sum_i p_i Delta_i / sum_i p_i in float32, in
// different orders, and eta_g itself from float32 (official) or float64 (fedkit)
// norms of 27 numbers, which may differ by about 27 float32 ulps (1.6e-6
// relative). Every element may therefore differ by a few 1e-7 of the magnitudes
// summed, |w| + eta_g * mean_i |Delta_i| (the largest seen is 1.7e-7); 1e-5 of
// them leaves a wide margin and is still 150 times below the smallest change a
// wrong eps, weighting or round index makes here (1.5e-3: eps decayed one round
// too few).
constexpr double kRelative = 1e-5;

void ExpectSameModel(const fl::ModelState& actual, const fl::ModelState& expected,
                     const at::Tensor& magnitude, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size());
  size_t offset = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const at::Tensor scale = magnitude.narrow(0, offset, actual.tensor(i).numel());
    offset += actual.tensor(i).numel();
    const at::Tensor error = (actual.tensor(i) - expected.tensor(i)).abs().flatten();
    const int64_t worst = (error - kRelative * scale).argmax().item<int64_t>();
    EXPECT_LE(error[worst].item<double>(), kRelative * scale[worst].item<double>())
        << what << " " << actual.entries()[i].name << "[" << worst
        << "]: fedkit " << actual.tensor(i).flatten()[worst].item<double>() << ", official "
        << expected.tensor(i).flatten()[worst].item<double>();
  }
}

at::Tensor Flat(const fl::ModelState& state) {
  std::vector<at::Tensor> parts;
  for (const auto& entry : state.entries()) parts.push_back(entry.tensor.flatten());
  return at::cat(parts);
}

TEST(FedExpOfficialTest, ServerStepsMatchTheOfficialCode) {
  const auto tensors = ReadTensorFixture(Testdata("official_fedexp.pt"));
  const auto scalars = ReadScalarFixture(Testdata("official_fedexp.txt"));

  // The official run's settings (main.py, EMNIST branch): eps_0 = 0.1 multiplied by
  // 0.998^2 before every round, eps_eff = M eps_t, data-size weights, the mean of
  // the last two iterates evaluated.
  Options options;
  options.set_epsilon(scalars.at("epsilon_0"));
  options.set_epsilon_decay(scalars.at("epsilon_decay"));
  options.set_epsilon_form(Options::CODE);
  options.set_weighting(Options::NUM_EXAMPLES);
  options.set_evaluate_last_two_average(true);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto fedexp = fl::Registry<fl::Aggregator>::Global().Create("fedexp", any);
  ASSERT_TRUE(fedexp.ok()) << fedexp.status();
  auto hook = fl::Registry<fl::ClientHook>::Global().Create("fedexp", google::protobuf::Any());
  ASSERT_TRUE(hook.ok()) << hook.status();

  const int rounds = static_cast<int>(scalars.at("rounds"));
  ASSERT_EQ(rounds, 4);
  int extrapolated = 0;
  for (int round = 1; round <= rounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const std::string prefix = absl::StrCat("round", round, "/");
    const fl::ModelState global = State(tensors, prefix + "global/");
    fl::ServerContext context;
    context.round = round;
    ASSERT_TRUE((*fedexp)->Configure(global, context).ok());

    const int clients = static_cast<int>(scalars.at(prefix + "participants"));
    at::Tensor weighted_abs = at::zeros_like(Flat(global));
    double total_weight = 0;
    for (int k = 0; k < clients; ++k) {
      const std::string client = absl::StrCat(prefix, "client", k, "/");
      fl::ClientUpdate update;
      update.client_id = static_cast<int>(scalars.at(client + "id"));
      update.delta = State(tensors, client + "delta/");
      update.num_examples = static_cast<int64_t>(scalars.at(client + "num_examples"));
      fl::HookContext hook_context;
      ASSERT_TRUE((*hook)->AfterTraining(hook_context, update).ok());
      weighted_abs.add_(Flat(update.delta).abs(), update.num_examples);
      total_weight += update.num_examples;
      ASSERT_TRUE((*fedexp)->Accumulate(std::move(update), context).ok());
    }
    auto next = (*fedexp)->Finalize(global, context);
    ASSERT_TRUE(next.ok()) << next.status();

    // The scalars of the step. eps_t is a float64 product on both sides.
    const double eta_g = scalars.at(prefix + "eta_g");
    EXPECT_NEAR(context.diagnostics.at("fedexp_epsilon"), scalars.at(prefix + "epsilon"),
                1e-12 * scalars.at(prefix + "epsilon"));
    EXPECT_NEAR(context.diagnostics.at("fedexp_mean_sq_norm"), scalars.at(prefix + "mean_sq_norm"),
                kRelative * scalars.at(prefix + "mean_sq_norm"));
    EXPECT_NEAR(context.diagnostics.at("fedexp_mean_update_sq_norm"),
                scalars.at(prefix + "mean_update_sq_norm"),
                kRelative * scalars.at(prefix + "mean_update_sq_norm"));
    EXPECT_NEAR(context.diagnostics.at("eta_g"), eta_g, kRelative * eta_g);
    if (eta_g > 1) ++extrapolated;

    // The weights: the next global model, and the one evaluated (round 1: the
    // iterate itself, which the code also evaluates in its first round).
    const at::Tensor magnitude =
        Flat(global).abs() + eta_g * weighted_abs / total_weight;
    ExpectSameModel(*next, State(tensors, prefix + "next/"), magnitude, "next global model");
    const fl::ModelState& evaluated =
        context.evaluation_model.has_value() ? *context.evaluation_model : *next;
    EXPECT_EQ(context.evaluation_model.has_value(), round > 1);
    ExpectSameModel(evaluated, State(tensors, prefix + "evaluated/"), magnitude,
                    "evaluated model");
  }
  // The fixture exercises both branches of max(1, .).
  EXPECT_EQ(extrapolated, 2);
}

}  // namespace
}  // namespace aggregators
