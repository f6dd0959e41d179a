// The shared conformance suite: every registered aggregator, created through the
// registry from its default options, on tiny fixtures. Linking a new aggregator
// into :all enrols it; there are no per-name exclusions. A property a method
// declares false (AggregatorProperties) must show on some fixture, or the plugin
// registers why it cannot (aggregators/common/conformance_reasons.h).
//
// Client updates come from real local training of a tiny model with the client
// hooks the aggregator's RoundPlan asks for, so methods that need extras (control
// variates, sensitivities, ...) get them from their own hooks.

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include "aggregators/common/conformance_reasons.h"
#include "aggregators/dp_fedavg/dp_fedavg_options.pb.h"
#include "aggregators/efl/efl_options.pb.h"
#include "aggregators/elastic/elastic_options.pb.h"
#include "aggregators/norm_clip/norm_clip_options.pb.h"
#include "aggregators/scaffold/scaffold_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_state_store.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/secure_aggregation.h"
#include "fl/spec.pb.h"
#include "fl/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::EflHookOptions;
using ::fedkit::aggregators::EflOptions;
using ::fedkit::aggregators::ElasticOptions;
using ::fedkit::aggregators::NormClipOptions;
using ::fedkit::aggregators::ScaffoldOptions;

using NamedSums = std::map<std::string, at::Tensor>;

google::protobuf::Any Pack(const google::protobuf::Message& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return any;
}

// Configurations besides the registry's defaults that the partial-sum tests also
// run, for the branches a default leaves out: test name -> (aggregator, options).
const std::map<std::string, std::pair<std::string, google::protobuf::Any>>& Variants() {
  static const auto* variants = [] {
    auto* v = new std::map<std::string, std::pair<std::string, google::protobuf::Any>>;
    ScaffoldOptions scaffold_exp;
    scaffold_exp.mutable_extrapolation();
    (*v)["scaffold_exp"] = {"scaffold", Pack(scaffold_exp)};

    NormClipOptions clip;
    clip.set_max_norm(0.3);
    clip.mutable_base()->set_name("fedexp");
    (*v)["norm_clip_max_norm_over_fedexp"] = {"norm_clip", Pack(clip)};

    ElasticOptions elastic_scaffold;
    elastic_scaffold.mutable_base()->set_name("scaffold");
    *elastic_scaffold.mutable_base()->mutable_options() = Pack(scaffold_exp);
    (*v)["elastic_over_scaffold_exp"] = {"elastic", Pack(elastic_scaffold)};

    ElasticOptions elastic_tensor;
    elastic_tensor.mutable_sensitivity()->set_granularity(fedkit::aggregators::TENSOR);
    elastic_tensor.set_max_over(fedkit::aggregators::EACH_TENSOR);
    (*v)["elastic_each_tensor"] = {"elastic", Pack(elastic_tensor)};

    ElasticOptions elastic_flbench;  // max over clients: no partial sums
    elastic_flbench.set_mode(fedkit::aggregators::FLBENCH);
    (*v)["elastic_flbench"] = {"elastic", Pack(elastic_flbench)};

    // Wrappers over a step-aware base must pass step_aware on (StepAwareAsDeclared).
    ElasticOptions elastic_fednova;
    elastic_fednova.mutable_base()->set_name("fednova");
    (*v)["elastic_over_fednova"] = {"elastic", Pack(elastic_fednova)};

    NormClipOptions clip_fednova;
    clip_fednova.set_max_norm(0.3);
    clip_fednova.mutable_base()->set_name("fednova");
    (*v)["norm_clip_over_fednova"] = {"norm_clip", Pack(clip_fednova)};

    EflOptions efl_fednova;
    efl_fednova.mutable_base()->set_name("fednova");
    (*v)["efl_over_fednova"] = {"efl", Pack(efl_fednova)};

    EflOptions efl_fedexp;
    efl_fedexp.mutable_base()->set_name("fedexp");
    (*v)["efl_over_fedexp"] = {"efl", Pack(efl_fedexp)};

    EflOptions efl_latest;  // every client's latest (u, v): no partial sums
    efl_latest.mutable_client()->set_curvature(EflHookOptions::LATEST_PER_CLIENT);
    (*v)["efl_latest_per_client"] = {"efl", Pack(efl_latest)};
    return v;
  }();
  return *variants;
}

std::vector<std::string> VariantNames() {
  std::vector<std::string> names;
  for (const auto& [name, spec] : Variants()) names.push_back(name);
  return names;
}

// A linear layer's parameters, in a submodule so that their names ("fc1.weight",
// "fc1.bias") say which layer they belong to.
class Dense : public torch::nn::Module {
 public:
  Dense(int64_t in, int64_t out) {
    weight = register_parameter("weight", at::randn({out, in}));
    bias = register_parameter("bias", at::randn({out}));
  }
  at::Tensor weight, bias;
};

// Two linear layers (4 -> 5 -> 3 classes, ReLU between), so that per-layer rules
// (Elastic's normaliser, OT fusion's neuron matching, MA-Echo's projections) have
// more than one layer to tell apart; and a float and an integer buffer, like a
// BatchNorm layer's.
class TinyModel : public fl::Model {
 public:
  TinyModel()
      : fc1_(register_module("fc1", std::make_shared<Dense>(4, 5))),
        fc2_(register_module("fc2", std::make_shared<Dense>(5, 3))) {
    running_ = register_buffer("running_mean", at::randn({3}));
    count_ = register_buffer("num_batches_tracked", at::tensor({7}, at::kLong));
  }
  at::Tensor Forward(const at::Tensor& x) override {
    return at::linear(Hidden(x), fc2_->weight, fc2_->bias);
  }
  absl::StatusOr<std::vector<LayerInput>> LayerInputs(const at::Tensor& x) override {
    return std::vector<LayerInput>{{"fc1.weight", "fc1.bias", x.flatten(1), {}},
                                   {"fc2.weight", "fc2.bias", Hidden(x), {}}};
  }

 private:
  at::Tensor Hidden(const at::Tensor& x) {
    return at::relu(at::linear(x.flatten(1), fc1_->weight, fc1_->bias));
  }

  std::shared_ptr<Dense> fc1_, fc2_;
  at::Tensor running_, count_;
};

class ConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    torch::manual_seed(11);
    global_ = fl::ModelState::FromModule(TinyModel());
    proxy_ = {at::randn({12, 4}), at::arange(12, at::kLong).remainder(3)};
    context_.new_model = [] { return absl::StatusOr<std::unique_ptr<fl::Model>>(std::make_unique<TinyModel>()); };
    context_.proxy = &proxy_;
    context_.round = 1;
    context_.round_seed = 5;
    context_.num_clients = 10;
    context_.expected_cohort_size = 3;
    context_.planned_rounds = 4;
  }

  // The parameter's aggregator: a registered name with default options (but
  // dp_fedavg's noise from the seed: the suite compares runs, and noise from the
  // operating system differs by design; dp_fedavg_test tests that noise), or a
  // configuration from Variants().
  std::unique_ptr<fl::Aggregator> Create() {
    auto variant = Variants().find(GetParam());
    google::protobuf::Any defaults;
    if (GetParam() == "dp_fedavg") {
      fedkit::aggregators::DpFedAvgOptions reproducible;
      reproducible.set_reproducible_noise(true);
      defaults = Pack(reproducible);
    }
    auto aggregator =
        variant == Variants().end()
            ? fl::Registry<fl::Aggregator>::Global().Create(GetParam(), defaults)
            : fl::Registry<fl::Aggregator>::Global().Create(variant->second.first,
                                                            variant->second.second);
    EXPECT_TRUE(aggregator.ok()) << aggregator.status();
    return aggregator.ok() ? *std::move(aggregator) : nullptr;
  }

  // The parameter's registered aggregator name (a variant's aggregator).
  std::string AggregatorName() const {
    auto variant = Variants().find(GetParam());
    return variant == Variants().end() ? GetParam() : variant->second.first;
  }

  // Every client is asked for this many local steps; a straggler completes fewer.
  static constexpr int64_t kPlannedSteps = 5;

  // One client of a fixture: `n` examples of its own with labels drawn from the
  // first `classes` classes; with `independent_init`, training starts from its own
  // random initialisation rather than from global_ (MA-Echo's one-shot setting);
  // `steps` of the kPlannedSteps asked for are completed (fewer: a straggler, as
  // client.system makes them, with local_steps < planned_steps in its update).
  struct Client {
    int64_t id;
    int64_t n;
    int64_t classes = 3;
    bool independent_init = false;
    int64_t steps = kPlannedSteps;
  };

  // `client` trains its steps of SGD from global_ (or its own start) with the hooks
  // `aggregator` plans for round 1; its buffer deltas are then randomised so
  // buffer handling is exercised too (the tiny model never updates its buffers).
  fl::ClientUpdate TrainedUpdate(fl::Aggregator& aggregator, const Client& client) {
    auto plan = aggregator.Configure(global_, context_);
    EXPECT_TRUE(plan.ok()) << plan.status();
    at::manual_seed(100 + client.id);
    fl::Examples examples{at::randn({client.n, 4}),
                          at::randint(0, client.classes, {client.n}, at::kLong)};
    std::vector<int64_t> indices(client.n);
    std::iota(indices.begin(), indices.end(), 0);
    fedkit::ClientTrainingSpec spec;
    spec.set_steps(static_cast<int32_t>(client.steps));
    spec.set_batch_size(4);
    spec.mutable_optimizer()->set_lr(0.1);
    fl::LocalTrainer trainer(spec, {}, &state_store_);
    fl::LocalTrainingInput input;
    input.client_id = client.id;
    input.round = 1;
    input.seed = static_cast<uint64_t>(client.id);
    input.global = &global_;
    input.plan = &*plan;
    input.examples = &examples;
    input.indices = &indices;
    std::optional<fl::ModelState> start;
    if (client.independent_init) {
      at::manual_seed(200 + client.id);
      start = fl::ModelState::FromModule(TinyModel());
      input.start = &*start;
    }
    TinyModel model;
    auto update = trainer.Train(model, input);
    // A failure is reported and the update left empty, so the other tests still run.
    if (!update.ok()) {
      ADD_FAILURE() << update.status();
      return fl::ClientUpdate();
    }
    update->planned_steps = kPlannedSteps;
    for (auto& entry : update->delta.mutable_entries()) {
      if (!entry.is_buffer) continue;
      entry.tensor = at::isFloatingType(entry.tensor.scalar_type())
                         ? at::randn_like(entry.tensor).mul_(0.1)
                         : at::full_like(entry.tensor, client.id % 3);
    }
    return *std::move(update);
  }

  std::vector<fl::ClientUpdate> Updates(const std::vector<Client>& clients) {
    auto planner = Create();
    std::vector<fl::ClientUpdate> updates;
    for (const Client& client : clients) updates.push_back(TrainedUpdate(*planner, client));
    return updates;
  }

  // One full round: Configure, Accumulate each update (copies), Finalize.
  fl::ModelState Round(fl::Aggregator& aggregator, const fl::ModelState& global,
                       const std::vector<fl::ClientUpdate>& updates) {
    auto plan = aggregator.Configure(global, context_);
    EXPECT_TRUE(plan.ok()) << plan.status();
    for (const fl::ClientUpdate& u : updates) {
      fl::ClientUpdate copy = u;
      copy.delta = u.delta.Clone();
      for (auto& [name, extra] : copy.extras) extra = extra.Clone();
      absl::Status status = aggregator.Accumulate(std::move(copy), context_);
      EXPECT_TRUE(status.ok()) << status;
    }
    auto next = aggregator.Finalize(global, context_);
    EXPECT_TRUE(next.ok()) << next.status();
    return next.ok() ? *std::move(next) : global.Clone();
  }

  static bool AllClose(const fl::ModelState& a, const fl::ModelState& b, double tol) {
    if (!a.CheckSameLayout(b).ok()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!a.tensor(i).to(at::kDouble).allclose(b.tensor(i).to(at::kDouble), tol, tol)) {
        return false;
      }
    }
    return true;
  }

  static void ExpectClose(const fl::ModelState& a, const fl::ModelState& b, double tol) {
    ASSERT_TRUE(a.CheckSameLayout(b).ok()) << a.CheckSameLayout(b);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(a.tensor(i).to(at::kDouble).allclose(b.tensor(i).to(at::kDouble), tol, tol))
          << a.entries()[i].name;
    }
  }

  fl::ModelState global_;
  fl::Examples proxy_;
  fl::ServerContext context_;
  fl::ClientStateStore state_store_;
};

TEST_P(ConformanceTest, CreatesFromDefaultOptions) { EXPECT_NE(Create(), nullptr); }

TEST_P(ConformanceTest, RejectsWrongOptionsType) {
  google::protobuf::Any wrong;
  wrong.PackFrom(fedkit::ProxySpec());
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create(GetParam(), wrong);
  EXPECT_EQ(aggregator.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(aggregator.status().message(), ::testing::HasSubstr("got fedkit.ProxySpec"));
}

TEST_P(ConformanceTest, DeterministicForFixedInputs) {
  std::vector<fl::ClientUpdate> updates = Updates({{1, 10}, {2, 30, 3, false, 3}});
  fl::ModelState a = Round(*Create(), global_, updates);
  fl::ModelState b = Round(*Create(), global_, updates);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a.tensor(i).equal(b.tensor(i)));
}

TEST_P(ConformanceTest, MovesTheModelAndStaysFinite) {
  fl::ModelState next = Round(*Create(), global_, Updates({{1, 10}, {2, 20}}));
  EXPECT_TRUE(next.AllFinite());
  EXPECT_GT(fl::ModelState::Difference(next, global_).SquaredNorm(), 0.0);
}

TEST_P(ConformanceTest, StateSurvivesSaveAndRestore) {
  auto original = Create();
  fl::ModelState after_one = Round(*original, global_, Updates({{1, 10}, {2, 20}}));
  const std::map<std::string, at::Tensor> saved = original->SaveState();
  auto restored = Create();
  ASSERT_TRUE(restored->RestoreState(saved).ok());
  // What was restored is what was saved, key for key and value for value.
  const std::map<std::string, at::Tensor> resaved = restored->SaveState();
  ASSERT_EQ(resaved.size(), saved.size());
  for (const auto& [key, tensor] : saved) {
    ASSERT_TRUE(resaved.count(key)) << key;
    EXPECT_TRUE(resaved.at(key).equal(tensor)) << key;
  }
  std::vector<fl::ClientUpdate> second = Updates({{3, 15}, {4, 25, 3, false, 2}});
  context_.round = 2;
  ExpectClose(Round(*restored, after_one, second), Round(*original, after_one, second), 1e-6);
}

// Restoring must check what it is given: a key the aggregator does not keep, or a
// tensor of the wrong shape under a key it does keep, is refused by RestoreState
// or, at the latest, by the next round (some state is only checked against the
// model there). Never silently used.
TEST_P(ConformanceTest, RestoreRefusesStateThatIsNotItsOwn) {
  auto original = Create();
  fl::ModelState after_one = Round(*original, global_, Updates({{1, 10}, {2, 20}}));
  const std::map<std::string, at::Tensor> saved = original->SaveState();
  std::vector<fl::ClientUpdate> second = Updates({{3, 15}, {4, 25}});
  context_.round = 2;
  // The status of RestoreState(state) followed by one round on `second`.
  auto restore_and_round = [&](const std::map<std::string, at::Tensor>& state) -> absl::Status {
    auto aggregator = Create();
    FL_RETURN_IF_ERROR(aggregator->RestoreState(state));
    FL_ASSIGN_OR_RETURN(fl::RoundPlan plan, aggregator->Configure(after_one, context_));
    for (const fl::ClientUpdate& u : second) {
      fl::ClientUpdate copy = u;
      copy.delta = u.delta.Clone();
      for (auto& [name, extra] : copy.extras) extra = extra.Clone();
      FL_RETURN_IF_ERROR(aggregator->Accumulate(std::move(copy), context_));
    }
    return aggregator->Finalize(after_one, context_).status();
  };
  std::map<std::string, at::Tensor> foreign = saved;
  foreign["not_a_key_of_any_aggregator"] = at::zeros({2});
  EXPECT_FALSE(restore_and_round(foreign).ok()) << "an unknown key was accepted";
  for (const auto& [key, tensor] : saved) {
    std::map<std::string, at::Tensor> misshapen = saved;
    misshapen[key] = at::zeros({tensor.numel() + 1}, tensor.options());
    EXPECT_FALSE(restore_and_round(misshapen).ok()) << key << " of the wrong shape was accepted";
  }
}

// The hooks a plan requests are the ones the aggregator declares (spec validation
// relies on the declaration to refuse a hook that would run twice).
TEST_P(ConformanceTest, PlansExactlyTheClientHooksItDeclares) {
  auto aggregator = Create();
  auto plan = aggregator->Configure(global_, context_);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> planned;
  for (const fl::HookRequest& request : plan->hooks) planned.push_back(request.name);
  EXPECT_THAT(planned,
              ::testing::UnorderedElementsAreArray(aggregator->properties().client_hooks));
}

// Elastic's zeta from the sensitivities the updates carry, as aggregators/elastic
// documents its defaults (PAPER mode, max_over EACH_LAYER, tau 0.5, eta 1):
//   w_k = n_k / sum_j n_j,  Omega = sum_k w_k Omega_k,
//   zeta = 1 + tau - Omega / max_layer(Omega)    (1 where max_layer(Omega) is 0),
// max_layer over the entries of the tensors whose names agree up to their last
// '.' (one module's weight and bias). In float64, by parameter name.
std::map<std::string, at::Tensor> ElasticZeta(const std::vector<fl::ClientUpdate>& updates) {
  constexpr double kTau = 0.5;
  std::map<std::string, at::Tensor> omega;
  double total = 0.0;
  for (const fl::ClientUpdate& update : updates) {
    const auto n = static_cast<double>(update.num_examples);
    total += n;
    const fl::ModelState& sent = update.extras.at("elastic/omega");
    for (size_t l = 0; l < sent.size(); ++l) {
      const at::Tensor weighted = sent.tensor(l).to(at::kDouble) * n;
      auto [it, added] = omega.emplace(sent.entries()[l].name, weighted);
      if (!added) it->second = it->second + weighted;
    }
  }
  auto layer_of = [](const std::string& name) { return name.substr(0, name.rfind('.')); };
  std::map<std::string, double> layer_max;
  for (auto& [name, sum] : omega) {
    sum = sum / total;
    double& max = layer_max[layer_of(name)];
    max = std::max(max, sum.max().item<double>());
  }
  std::map<std::string, at::Tensor> zeta;
  for (const auto& [name, sum] : omega) {
    const double max = layer_max.at(layer_of(name));
    zeta[name] = max > 0 ? 1.0 + kTau - (sum / max).clamp(0.0, 1.0) : at::ones_like(sum);
  }
  return zeta;
}

// Every aggregator as Elastic's base. The base's hooks and broadcast go out with
// Elastic's; on the same updates, Elastic's step is the base's step scaled per
// parameter by zeta (computed here from the clients' sensitivities), for the
// training iterate and for the evaluation model the base sets (FedExP's), whatever
// the base's step is: an average, a stateful optimiser's (FedAdam), a one-shot
// method's fresh model minus the global one. Buffers are the base's, unscaled;
// the state is the base's own, as the base alone leaves it; a predictor the base
// lends (the ensemble) is dropped, since Elastic's result is weights.
TEST_P(ConformanceTest, ComposesAsElasticsBase) {
  context_.round = 2;  // FedExP evaluates the two-iterate average from round 2
  ElasticOptions options;
  options.mutable_base()->set_name(GetParam());
  if (GetParam() == "dp_fedavg") {  // noise from the seed, as in Create()
    fedkit::aggregators::DpFedAvgOptions reproducible;
    reproducible.set_reproducible_noise(true);
    *options.mutable_base()->mutable_options() = Pack(reproducible);
  }
  google::protobuf::Any any;
  any.PackFrom(options);
  auto elastic = fl::Registry<fl::Aggregator>::Global().Create("elastic", any);
  if (GetParam() == "elastic") {
    EXPECT_FALSE(elastic.ok()) << "elastic cannot wrap itself";
    return;
  }
  ASSERT_TRUE(elastic.ok()) << elastic.status();
  auto base = Create();
  auto elastic_plan = (*elastic)->Configure(global_, context_);
  auto base_plan = base->Configure(global_, context_);
  ASSERT_TRUE(elastic_plan.ok() && base_plan.ok());
  std::vector<std::string> expected_hooks = {"elastic"};
  for (const fl::HookRequest& r : base_plan->hooks) expected_hooks.push_back(r.name);
  std::vector<std::string> hooks;
  for (const fl::HookRequest& r : elastic_plan->hooks) hooks.push_back(r.name);
  EXPECT_EQ(hooks, expected_hooks);
  EXPECT_EQ(NumBytes(elastic_plan->broadcast), NumBytes(base_plan->broadcast));
  for (const auto& [name, tensor] : base_plan->broadcast) {
    EXPECT_TRUE(elastic_plan->broadcast.count(name)) << name;
  }

  std::vector<fl::ClientUpdate> updates;
  for (const Client& client : std::vector<Client>{{1, 10}, {2, 30}, {3, 5}}) {
    updates.push_back(TrainedUpdate(**elastic, client));
  }
  const std::map<std::string, at::Tensor> zeta = ElasticZeta(updates);
  context_.evaluation_model.reset();
  fl::ModelState next_base = Round(*base, global_, updates);
  std::optional<fl::ModelState> eval_base = std::move(context_.evaluation_model);
  context_.evaluation_model.reset();
  context_.evaluation_predictor = nullptr;
  fl::ModelState next_elastic = Round(**elastic, global_, updates);
  std::optional<fl::ModelState> eval_elastic = std::move(context_.evaluation_model);
  EXPECT_FALSE(context_.evaluation_predictor) << "Elastic's result is its weights";
  ASSERT_EQ(eval_elastic.has_value(), eval_base.has_value());

  // elastic - g == zeta * (base - g) for every parameter, to float32 rounding: zeta
  // and the step are computed in float32 from sums of a few float32 terms, so each
  // side is within a few float32 ulps of |g| + |step|. Without zeta (or with
  // another normaliser) they differ by up to half the step.
  double largest_change = 0.0, largest_tolerance = 0.0;
  auto expect_scaled = [&](const fl::ModelState& from_base, const fl::ModelState& from_elastic,
                           const std::string& which) {
    ASSERT_TRUE(global_.CheckSameLayout(from_elastic).ok()) << which;
    for (size_t i = 0; i < global_.size(); ++i) {
      const std::string& name = global_.entries()[i].name;
      if (global_.entries()[i].is_buffer) {
        EXPECT_TRUE(from_elastic.tensor(i).equal(from_base.tensor(i))) << which << " " << name;
        continue;
      }
      ASSERT_TRUE(zeta.count(name)) << "no sensitivity sent for " << name;
      const at::Tensor g = global_.tensor(i).to(at::kDouble);
      const at::Tensor step = from_base.tensor(i).to(at::kDouble) - g;
      const at::Tensor expected = zeta.at(name) * step;
      const at::Tensor actual = from_elastic.tensor(i).to(at::kDouble) - g;
      const double tolerance = 16 * std::numeric_limits<float>::epsilon() *
                               (g.abs().max() + step.abs().max()).item<double>();
      const double error = (actual - expected).abs().max().item<double>();
      EXPECT_LE(error, tolerance) << which << " " << name << ": Elastic's step is not zeta times "
                                  << GetParam() << "'s";
      largest_change = std::max(largest_change, (expected - step).abs().max().item<double>());
      largest_tolerance = std::max(largest_tolerance, tolerance);
    }
  };
  expect_scaled(next_base, next_elastic, "next model");
  if (eval_base.has_value()) expect_scaled(*eval_base, *eval_elastic, "evaluation model");
  // zeta must visibly change the base's step, or the check above proves nothing.
  EXPECT_GT(largest_change, 100 * largest_tolerance) << GetParam() << "'s step is too small";

  const std::map<std::string, at::Tensor> elastic_state = (*elastic)->SaveState();
  const std::map<std::string, at::Tensor> base_state = base->SaveState();
  ASSERT_EQ(elastic_state.size(), base_state.size());
  for (const auto& [key, tensor] : base_state) {
    ASSERT_TRUE(elastic_state.count(key)) << key;
    EXPECT_TRUE(elastic_state.at(key).equal(tensor)) << "state " << key;
  }
}

// uses_proxy is declared, and the benchmark picks its family by it: without a proxy
// a method that claims it fails the round, one that does not gives its usual result.
TEST_P(ConformanceTest, NeedsAProxyExactlyWhenItSaysSo) {
  std::vector<fl::ClientUpdate> updates = Updates({{1, 10}, {2, 20}});
  fl::ModelState with_proxy = Round(*Create(), global_, updates);
  auto aggregator = Create();
  context_.proxy = nullptr;
  absl::StatusOr<fl::ModelState> next = absl::UnknownError("no round");
  absl::StatusOr<fl::RoundPlan> plan = aggregator->Configure(global_, context_);
  if (plan.ok()) {
    for (const fl::ClientUpdate& u : updates) {
      fl::ClientUpdate copy = u;
      copy.delta = u.delta.Clone();  // Accumulate may write into what it is handed
      for (auto& [name, extra] : copy.extras) extra = extra.Clone();
      ASSERT_TRUE(aggregator->Accumulate(std::move(copy), context_).ok());
    }
    next = aggregator->Finalize(global_, context_);
  } else {
    next = plan.status();
  }
  if (aggregator->properties().uses_proxy) {
    EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition) << next.status();
    EXPECT_THAT(std::string(next.status().message()), ::testing::HasSubstr("server.proxy"));
  } else {
    ASSERT_TRUE(next.ok()) << next.status();
    ExpectClose(*next, with_proxy, 1e-6);
  }
}

TEST_P(ConformanceTest, RejectsAMisshapenUpdate) {
  auto aggregator = Create();
  ASSERT_TRUE(aggregator->Configure(global_, context_).ok());
  fl::ClientUpdate good = Updates({{1, 10}})[0];
  fl::ClientUpdate bad = good;
  bad.delta.mutable_entries().pop_back();
  ASSERT_TRUE(aggregator->Accumulate(std::move(good), context_).ok());
  EXPECT_FALSE(aggregator->Accumulate(std::move(bad), context_).ok());
}

INSTANTIATE_TEST_SUITE_P(AllAggregators, ConformanceTest,
                         ::testing::ValuesIn(fl::Registry<fl::Aggregator>::Global().Names()),
                         [](const auto& info) { return info.param; });

// What AggregatorProperties declares, checked both ways: a property claimed holds
// on every fixture below; one declared false is shown false on at least one of
// them, or the plugin registers why no small fixture can show it
// (aggregators/common/conformance_reasons.h). So is an aggregator without partial
// sums. Run on every aggregator's defaults and on the variants, whose options
// change some declarations.
class DeclaredPropertiesTest : public ConformanceTest {
 protected:
  // One client holding all three classes, and one holding only two (a class-aware
  // mean then has a class that no client holds).
  // A lone straggler too.
  static std::vector<std::vector<Client>> LoneClients() {
    return {{{1, 10}}, {{1, 10, 2}}, {{1, 10, 3, false, 2}}};
  }

  // Cohorts whose order is reversed: three clients of different sizes and step
  // counts; two (every Krum score then ties); three starting from their own
  // initialisations, as in one-shot runs (the first client, OT fusion's reference,
  // then decides how the others' neurons are matched).
  static std::vector<std::vector<Client>> Cohorts() {
    return {{{1, 10}, {2, 30, 3, false, 2}, {3, 5, 3, false, 1}},
            {{1, 10}, {2, 30}},
            {{1, 10, 3, true}, {2, 30, 3, true}, {3, 5, 3, true}}};
  }

  static std::string Describe(const std::vector<Client>& clients) {
    std::string text = "{";
    for (const Client& c : clients) {
      text += " client " + std::to_string(c.id) + " (" + std::to_string(c.n) + " examples, " +
              std::to_string(c.classes) + " classes" +
              (c.steps < kPlannedSteps ? ", " + std::to_string(c.steps) + " of " +
                                             std::to_string(kPlannedSteps) + " steps"
                                       : "") +
              (c.independent_init ? ", own init)" : ")");
    }
    return text + " }";
  }

  // A false declaration `claim` that the fixture `shown_on` showed (empty: none
  // did) needs no reason; one that no fixture showed needs one.
  void ExpectShownOrExplained(ConformanceClaim claim, const std::string& shown_on) {
    const ConformanceReason* reason = FindConformanceReason(AggregatorName(), claim);
    if (!shown_on.empty()) {
      RecordProperty("shown_on", shown_on);
      EXPECT_EQ(reason, nullptr)
          << AggregatorName() << ": the reason at " << reason->file << ":" << reason->line
          << " says its " << ConformanceClaimName(claim) << " cannot be shown, but the fixture "
          << shown_on << " shows it: remove the stale reason";
    } else if (claim == ConformanceClaim::kNoPartialSums) {
      EXPECT_NE(reason, nullptr)
          << GetParam() << " has no partial sums: register why (FL_CONFORMANCE_REASON, "
             "aggregators/common/conformance_reasons.h), since no fixture can show it";
    } else {
      EXPECT_NE(reason, nullptr)
          << GetParam() << " declares " << ConformanceClaimName(claim)
          << ", but no fixture of the conformance suite shows it: if the method has the "
             "property, fix its declaration; if it does not, register why no small fixture "
             "can show it (FL_CONFORMANCE_REASON, aggregators/common/conformance_reasons.h)";
    }
  }
};

TEST_P(DeclaredPropertiesTest, SingleClientIdentityAsDeclared) {
  const bool claimed = Create()->properties().single_client_identity;
  std::string shown_on;
  for (const std::vector<Client>& lone : LoneClients()) {
    fl::ClientUpdate update = Updates(lone)[0];
    fl::ModelState expected = global_.Clone();
    expected.Axpy(1.0, update.delta);
    const fl::ModelState next = Round(*Create(), global_, {update});
    if (claimed) {
      EXPECT_TRUE(AllClose(next, expected, 1e-6)) << "not global + delta on " << Describe(lone);
    } else if (shown_on.empty() && !AllClose(next, expected, 1e-6)) {
      shown_on = Describe(lone);
    }
  }
  if (!claimed) ExpectShownOrExplained(ConformanceClaim::kNotSingleClientIdentity, shown_on);
}

TEST_P(DeclaredPropertiesTest, OrderInvarianceAsDeclared) {
  const bool claimed = Create()->properties().order_invariant;
  std::string shown_on;
  for (const std::vector<Client>& cohort : Cohorts()) {
    std::vector<fl::ClientUpdate> updates = Updates(cohort);
    const fl::ModelState forward = Round(*Create(), global_, updates);
    std::reverse(updates.begin(), updates.end());
    const fl::ModelState reversed = Round(*Create(), global_, updates);
    if (claimed) {
      EXPECT_TRUE(AllClose(reversed, forward, 1e-5)) << "the order matters on " << Describe(cohort);
    } else if (shown_on.empty() && !AllClose(reversed, forward, 1e-5)) {
      shown_on = Describe(cohort);
    }
  }
  if (!claimed) ExpectShownOrExplained(ConformanceClaim::kNotOrderInvariant, shown_on);
}

// step_aware both ways: the same deltas with the stragglers' local_steps raised to
// the planned count must change the result or the state kept exactly when the
// aggregator says it reads them. Undeclared, validation would let
// server.incomplete_updates: SCALE correct a straggler twice; declared without
// cause, it refuses SCALE for nothing.
TEST_P(DeclaredPropertiesTest, StepAwareAsDeclared) {
  const bool claimed = Create()->properties().step_aware;
  const std::vector<Client> cohort = {{1, 10}, {2, 30, 3, false, 2}, {3, 5, 3, false, 1}};
  const std::vector<fl::ClientUpdate> stragglers = Updates(cohort);
  std::vector<fl::ClientUpdate> completed;
  for (const fl::ClientUpdate& update : stragglers) {
    completed.push_back(fl::CloneUpdate(update));
    completed.back().local_steps = completed.back().planned_steps;
  }
  auto as_sent = Create();
  auto as_if_complete = Create();
  const fl::ModelState a = Round(*as_sent, global_, stragglers);
  const fl::ModelState b = Round(*as_if_complete, global_, completed);
  bool state_differs = false;
  const std::map<std::string, at::Tensor> state_a = as_sent->SaveState();
  const std::map<std::string, at::Tensor> state_b = as_if_complete->SaveState();
  for (const auto& [key, tensor] : state_a) {
    state_differs = state_differs || !state_b.count(key) ||
                    !tensor.to(at::kDouble).allclose(state_b.at(key).to(at::kDouble), 1e-6, 1e-6);
  }
  const bool reads_steps = !AllClose(a, b, 1e-6) || state_differs;
  EXPECT_EQ(reads_steps, claimed)
      << GetParam() << (claimed ? " declares step_aware, but its result and state ignore "
                                  "local_steps on "
                                : " reads local_steps without declaring step_aware on ")
      << Describe(cohort);
}

// dp_sums as declared (fl::DpSum): every partial sum matches exactly one declared
// prefix, and one more client (weight 1, parameter norm r, buffers zero) moves
// the sums of deltas together by at most r, the sums of squared norms by at most
// r^2, and every weight total and count by exactly 1. Its updates are trained
// under dp_fedavg over this aggregator with a fixed clip C and no noise (so the
// aggregator's own hooks see the clipped update): C = 0.01 clips every update to
// r = C < 1, and clients starting from their own initialisations clipped at C = 4
// give r > 1, which together tell C from C^2.
TEST_P(DeclaredPropertiesTest, DpSumsAsDeclared) {
  const std::vector<fl::DpSum> declared = Create()->properties().dp_sums;
  if (declared.empty()) GTEST_SKIP() << GetParam() << " declares no DP sums";
  for (const auto& [clip, own_init] : {std::pair{0.01, false}, std::pair{4.0, true}}) {
    fedkit::aggregators::DpFedAvgOptions options;
    options.set_clip_norm(clip);
    options.set_noise_multiplier(0);
    options.mutable_base()->set_name(AggregatorName());
    if (auto variant = Variants().find(GetParam()); variant != Variants().end()) {
      *options.mutable_base()->mutable_options() = variant->second.second;
    }
    google::protobuf::Any any;
    any.PackFrom(options);
    auto planner = fl::Registry<fl::Aggregator>::Global().Create("dp_fedavg", any);
    ASSERT_TRUE(planner.ok()) << "dp_fedavg refuses a base that declares DP sums: "
                              << planner.status();
    std::vector<fl::ClientUpdate> updates;
    for (const Client& client : {Client{1, 10, 3, own_init}, Client{2, 30, 3, own_init},
                                 Client{3, 5, 3, own_init}}) {
      updates.push_back(TrainedUpdate(**planner, client));
      updates.back().num_examples = 1;
      for (auto& entry : updates.back().delta.mutable_entries()) {
        if (entry.is_buffer) entry.tensor.zero_();
      }
    }
    const double r = std::sqrt(updates.back().delta.SquaredNorm());
    ASSERT_NEAR(r, clip, 1e-5 * clip) << "the fixture's last update must be clipped to C";
    std::map<std::string, at::Tensor> before, after;
    for (bool with_last : {false, true}) {
      auto aggregator = Create();
      ASSERT_TRUE(aggregator->Configure(global_, context_).ok());
      for (size_t k = 0; k < updates.size() - (with_last ? 0 : 1); ++k) {
        ASSERT_TRUE(aggregator->Accumulate(fl::CloneUpdate(updates[k]), context_).ok());
      }
      auto sums = aggregator->PartialSums();
      ASSERT_TRUE(sums.has_value()) << "declares DP sums but has no partial sums";
      for (const auto& [name, sum] : *sums) (with_last ? after : before)[name] = sum.to(at::kDouble);
    }
    double update_moved = 0, squared_norm_moved = 0;
    for (const auto& [name, sum] : after) {
      const fl::DpSum* match = nullptr;
      int matches = 0;
      for (const fl::DpSum& d : declared) {
        if (name.rfind(d.prefix, 0) == 0) {
          match = &d;
          ++matches;
        }
      }
      ASSERT_EQ(matches, 1) << "partial sum \"" << name << "\" must match exactly one DP sum";
      const at::Tensor moved = sum - before.at(name);
      switch (match->role) {
        case fl::DpSum::Role::kUpdateSum:
          update_moved += moved.pow(2).sum().item<double>();
          break;
        case fl::DpSum::Role::kSquaredNormSum:
          squared_norm_moved += moved.pow(2).sum().item<double>();
          break;
        case fl::DpSum::Role::kWeightTotal:
        case fl::DpSum::Role::kCount:
          EXPECT_NEAR(moved.item<double>(), 1.0, 1e-9) << name;
          break;
      }
    }
    EXPECT_LE(std::sqrt(update_moved), r * (1 + 1e-5)) << "C = " << clip;
    EXPECT_GT(std::sqrt(update_moved), 0.0) << "the sums of deltas did not move";
    EXPECT_LE(std::sqrt(squared_norm_moved), r * r * (1 + 1e-5)) << "C = " << clip;
  }
}

// sums_only as declared: partial sums exactly when claimed (validation admits
// secure aggregation on the claim alone), and a reason where there are none.
TEST_P(DeclaredPropertiesTest, PartialSumsAsDeclared) {
  auto aggregator = Create();
  ASSERT_TRUE(aggregator->Configure(global_, context_).ok());
  ASSERT_TRUE(aggregator->Accumulate(Updates({{1, 10}})[0], context_).ok());
  const bool has_sums = aggregator->PartialSums().has_value();
  EXPECT_EQ(has_sums, aggregator->properties().sums_only)
      << GetParam() << (has_sums ? " has partial sums but does not declare sums_only"
                                 : " declares sums_only but has no partial sums");
  if (has_sums) return;  // PartialSumsTest checks them
  ExpectShownOrExplained(ConformanceClaim::kNoPartialSums, "");
}

INSTANTIATE_TEST_SUITE_P(AllAggregators, DeclaredPropertiesTest,
                         ::testing::ValuesIn(fl::Registry<fl::Aggregator>::Global().Names()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Variants, DeclaredPropertiesTest, ::testing::ValuesIn(VariantNames()),
                         [](const auto& info) { return info.param; });

// Every reason names a registered aggregator, says something, and is the only one
// for its claim.
TEST(ConformanceReasonsTest, NameRegisteredAggregatorsOnceEach) {
  const std::vector<std::string> names = fl::Registry<fl::Aggregator>::Global().Names();
  std::set<std::pair<std::string, ConformanceClaim>> seen;
  for (const ConformanceReason& reason : ConformanceReasons()) {
    const std::string where = std::string(reason.file) + ":" + std::to_string(reason.line);
    EXPECT_THAT(names, ::testing::Contains(reason.aggregator)) << where;
    EXPECT_GT(std::string(reason.reason).size(), 10u) << where << ": say why";
    EXPECT_TRUE(seen.insert({reason.aggregator, reason.claim}).second)
        << where << ": a second reason for " << reason.aggregator << "'s "
        << ConformanceClaimName(reason.claim);
  }
}

// Distributed runs (fl::Aggregator::PartialSums): partial sums accumulated over
// shares of the round, summed and merged into one instance, finalize as that
// instance would have had it accumulated the whole round; an aggregator without
// them says so consistently.
class PartialSumsTest : public ConformanceTest {
 protected:
  // What a round ends with, besides the aggregator's state.
  struct Outcome {
    fl::ModelState next;
    std::optional<fl::ModelState> evaluation;
    bool has_predictor = false;
    std::map<std::string, double> diagnostics;
  };

  void SetUp() override {
    ConformanceTest::SetUp();
    updates_ = Updates({{1, 10}, {2, 30}, {3, 5, 3, false, 2}, {4, 20}, {5, 15, 3, false, 1}});
    // FedExP evaluates the two-iterate average from round 2.
    context_.round = 2;
  }

  // A fresh instance configured on global_ in its own `context`, after
  // accumulating updates_[begin, end) (copies).
  std::unique_ptr<fl::Aggregator> Accumulated(size_t begin, size_t end,
                                              fl::ServerContext& context) {
    context = context_;
    auto aggregator = Create();
    auto plan = aggregator->Configure(global_, context);
    EXPECT_TRUE(plan.ok()) << plan.status();
    for (size_t i = begin; i < end; ++i) {
      absl::Status status = aggregator->Accumulate(fl::CloneUpdate(updates_[i]), context);
      EXPECT_TRUE(status.ok()) << status;
    }
    return aggregator;
  }

  Outcome Finalized(fl::Aggregator& aggregator, fl::ServerContext& context) {
    auto next = aggregator.Finalize(global_, context);
    EXPECT_TRUE(next.ok()) << next.status();
    return {next.ok() ? *std::move(next) : global_.Clone(), std::move(context.evaluation_model),
            context.evaluation_predictor != nullptr, context.diagnostics};
  }

  // One instance over updates_[0, end).
  Outcome WholeRound(size_t end) {
    fl::ServerContext context;
    auto aggregator = Accumulated(0, end, context);
    return Finalized(*aggregator, context);
  }

  static void ExpectSameLayout(const NamedSums& actual, const NamedSums& expected) {
    ASSERT_EQ(actual.size(), expected.size());
    for (const auto& [name, tensor] : expected) {
      ASSERT_TRUE(actual.count(name)) << name;
      EXPECT_EQ(actual.at(name).sizes(), tensor.sizes()) << name;
      EXPECT_EQ(actual.at(name).scalar_type(), tensor.scalar_type()) << name;
    }
  }

  // Element-wise, as a distributed run's all-reduce sums them.
  static NamedSums Sum(const NamedSums& a, const NamedSums& b) {
    NamedSums sum;
    for (const auto& [name, tensor] : a) sum[name] = tensor + b.at(name);
    return sum;
  }

  static void ExpectAllClose(const fl::ModelState& actual, const fl::ModelState& expected) {
    ASSERT_TRUE(actual.CheckSameLayout(expected).ok()) << actual.CheckSameLayout(expected);
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_TRUE(actual.tensor(i).to(at::kDouble).allclose(expected.tensor(i).to(at::kDouble),
                                                             /*rtol=*/1e-5, /*atol=*/1e-6))
          << actual.entries()[i].name << ": " << actual.tensor(i) << " vs " << expected.tensor(i);
    }
  }

  static void ExpectSameOutcome(const Outcome& actual, const Outcome& expected) {
    ExpectAllClose(actual.next, expected.next);
    ASSERT_EQ(actual.evaluation.has_value(), expected.evaluation.has_value());
    if (expected.evaluation.has_value()) ExpectAllClose(*actual.evaluation, *expected.evaluation);
    EXPECT_EQ(actual.has_predictor, expected.has_predictor);
    ASSERT_EQ(actual.diagnostics.size(), expected.diagnostics.size());
    for (const auto& [name, value] : expected.diagnostics) {
      ASSERT_TRUE(actual.diagnostics.count(name)) << name;
      EXPECT_NEAR(actual.diagnostics.at(name), value, 1e-6 + 1e-5 * std::abs(value)) << name;
    }
  }

  std::vector<fl::ClientUpdate> updates_;
};

// Two processes, updates 0..2 and 3..4: their summed partial sums merged into the
// first finalize as one instance over all five does.
TEST_P(PartialSumsTest, MergedSharesFinalizeAsTheWholeRound) {
  fl::ServerContext context_x, context_y;
  auto x = Accumulated(0, 3, context_x);
  auto y = Accumulated(3, 5, context_y);
  std::optional<NamedSums> sums_x = x->PartialSums();
  std::optional<NamedSums> sums_y = y->PartialSums();
  ASSERT_EQ(sums_x.has_value(), sums_y.has_value());
  if (!sums_x.has_value()) GTEST_SKIP() << "no partial sums: the updates are gathered";
  ExpectSameLayout(*sums_y, *sums_x);
  const Outcome expected = WholeRound(5);
  ASSERT_TRUE(x->MergePartialSums(Sum(*sums_x, *sums_y)).ok());
  ExpectSameOutcome(Finalized(*x, context_x), expected);
}

// A process that took no update has partial sums of the same layout, all zeros;
// merged into it, one process's sums over the whole round finalize as that round.
TEST_P(PartialSumsTest, AnEmptyShareSumsToZerosOfTheSameLayout) {
  fl::ServerContext context_x, context_z;
  auto x = Accumulated(0, 5, context_x);
  // A process that does not finalize goes on to the next round's Configure: what it
  // took before is not part of this round.
  auto z = Accumulated(0, 2, context_z);
  ASSERT_TRUE(z->Configure(global_, context_z).ok());
  std::optional<NamedSums> sums_x = x->PartialSums();
  std::optional<NamedSums> sums_z = z->PartialSums();
  ASSERT_EQ(sums_z.has_value(), sums_x.has_value());
  if (!sums_x.has_value()) {
    EXPECT_FALSE(z->MergePartialSums({}).ok());
    GTEST_SKIP() << "no partial sums: the updates are gathered";
  }
  ExpectSameLayout(*sums_z, *sums_x);
  for (const auto& [name, tensor] : *sums_z) {
    EXPECT_TRUE(tensor.eq(0).all().item<bool>()) << name << ": " << tensor;
  }
  const Outcome expected = WholeRound(5);
  ASSERT_TRUE(z->MergePartialSums(Sum(*sums_x, *sums_z)).ok());
  ExpectSameOutcome(Finalized(*z, context_z), expected);
}

// Sums missing a name, with one more, or with a tensor of another shape or dtype
// are refused, and a refused merge changes nothing.
// Secure aggregation (fl/secure_aggregation.h) over every aggregator declaring
// sums_only: each update's partial sums, taken alone on the clients' own instance,
// encoded, masked and unmasked as a total, are the plain sums to within one
// encoding quantum per contribution, and finalize as the plain round does; a
// client dropping after the key exchange leaves exactly the others' total. The
// norm bound is the fixture's largest update norm, so nothing is clipped.
TEST_P(PartialSumsTest, SecureAggregationUnmasksThePlainSums) {
  if (!Create()->properties().sums_only) GTEST_SKIP() << "not sums_only: refused under SecAgg";
  fl::SecureAggregationConfig config;
  config.threshold = 3;
  // The public range is what one client's sums can reach (the fixture's largest),
  // as a deployment must bound it.
  for (size_t i = 0; i < updates_.size(); ++i) {
    config.update_norm_bound = std::max(config.update_norm_bound,
                                        std::sqrt(updates_[i].delta.SquaredNorm()) * (1 + 1e-6));
    fl::ServerContext context;
    const std::optional<NamedSums> alone = Accumulated(i, i + 1, context)->PartialSums();
    for (const auto& [name, sum] : *alone) {
      if (sum.numel() > 0) {
        config.value_range = std::max(config.value_range, sum.abs().max().item<double>());
      }
    }
  }
  std::vector<int64_t> cohort;
  for (const fl::ClientUpdate& update : updates_) cohort.push_back(update.client_id);
  for (size_t contributing : {updates_.size(), updates_.size() - 1}) {
    SCOPED_TRACE(contributing == updates_.size() ? "all contribute" : "the last drops out");
    fl::ServerContext plain_context, server_context;
    auto plain = Accumulated(0, contributing, plain_context);
    auto server = Accumulated(0, 0, server_context);
    auto round = fl::SecureAggregationRound::Start(config, cohort, *server->PartialSums(), 7);
    ASSERT_TRUE(round.ok()) << round.status();
    auto client_side = Create();
    for (size_t i = 0; i < contributing; ++i) {
      ASSERT_TRUE((*round)->Contribute(updates_[i], *client_side, global_, context_).ok());
    }
    auto sums = (*round)->Unmask();
    ASSERT_TRUE(sums.ok()) << sums.status();
    EXPECT_EQ((*round)->clipped_updates(), 0);
    EXPECT_EQ((*round)->saturated_values(), 0);
    const NamedSums expected = *plain->PartialSums();
    ExpectSameLayout(*sums, expected);
    // One quantum per contribution, plus the plain sum's own rounding (K additions
    // in its dtype).
    const double k = static_cast<double>(contributing);
    for (const auto& [name, tensor] : expected) {
      if (tensor.numel() == 0) continue;
      const double epsilon = tensor.scalar_type() == at::kFloat ? 0x1p-23 : 0x1p-52;
      const at::Tensor plain_sum = tensor.to(at::kDouble);
      const at::Tensor excess = (sums->at(name).to(at::kDouble) - plain_sum).abs() -
                                (k * (*round)->quantum() + k * epsilon * plain_sum.abs());
      EXPECT_LE(excess.max().item<double>(), 0.0) << name;
    }
    // Finalized, the encoding's error goes through the method's own algebra (Elastic
    // divides by each tensor's largest sensitivity, say): the secure model must be no
    // further from the plain one than the plain sums moved by random signs of the
    // same K quanta take it, with a factor 4 of room.
    fl::ServerContext perturbed_context;
    auto perturbed = Accumulated(0, 0, perturbed_context);
    at::Generator generator = at::detail::createCPUGenerator(11);
    NamedSums moved;
    for (const auto& [name, tensor] : expected) {
      const at::Tensor signs =
          at::randint(0, 2, tensor.sizes(), generator, at::kDouble).mul(2).sub(1);
      moved[name] = at::isFloatingType(tensor.scalar_type())
                        ? (tensor.to(at::kDouble) + signs * (k * (*round)->quantum()))
                              .to(tensor.scalar_type())
                        : tensor.clone();
    }
    ASSERT_TRUE(perturbed->MergePartialSums(std::move(moved)).ok());
    ASSERT_TRUE(server->MergePartialSums(*std::move(sums)).ok());
    const Outcome reference = Finalized(*plain, plain_context);
    const Outcome nearby = Finalized(*perturbed, perturbed_context);
    const Outcome secure = Finalized(*server, server_context);
    auto distance = [](const fl::ModelState& a, const fl::ModelState& b) {
      double largest = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        if (a.tensor(i).numel() == 0) continue;
        largest = std::max(largest, (a.tensor(i).to(at::kDouble) - b.tensor(i).to(at::kDouble))
                                        .abs().max().item<double>());
      }
      return largest;
    };
    EXPECT_LE(distance(secure.next, reference.next),
              4 * distance(nearby.next, reference.next) + 1e-6);
  }
}

TEST_P(PartialSumsTest, MergeRefusesSumsOfAnotherLayout) {
  fl::ServerContext context;
  auto x = Accumulated(0, 2, context);
  const std::optional<NamedSums> sums = x->PartialSums();
  if (!sums.has_value()) {
    EXPECT_FALSE(x->MergePartialSums({}).ok());
    GTEST_SKIP() << "no partial sums: the updates are gathered";
  }
  auto expect_refused = [&](NamedSums wrong, const std::string& what) {
    const absl::Status status = x->MergePartialSums(std::move(wrong));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << what << ": " << status;
  };
  for (const auto& [name, tensor] : *sums) {
    NamedSums wrong = *sums;
    wrong.erase(name);
    expect_refused(wrong, "without " + name);
    wrong = *sums;
    wrong[name] = at::zeros({tensor.numel() + 1}, tensor.options());
    expect_refused(wrong, name + " misshapen");
    wrong = *sums;
    wrong[name] = tensor.to(tensor.scalar_type() == at::kDouble ? at::kFloat : at::kDouble);
    expect_refused(wrong, name + " of another dtype");
  }
  NamedSums extra = *sums;
  extra["not_a_partial_sum"] = at::zeros({});
  expect_refused(extra, "an unknown name");
  ASSERT_TRUE(x->MergePartialSums(*sums).ok());
  ExpectSameOutcome(Finalized(*x, context), WholeRound(2));
}

INSTANTIATE_TEST_SUITE_P(AllAggregators, PartialSumsTest,
                         ::testing::ValuesIn(fl::Registry<fl::Aggregator>::Global().Names()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Variants, PartialSumsTest, ::testing::ValuesIn(VariantNames()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace aggregators
