// Plugins composed through the real runner (BuildExperiment + RunExperiment) on a
// slice of Fashion-MNIST split over clients of unequal sizes, half of them
// stragglers each round, two rounds each, with 1 and with 3 workers:
//   - every aggregator as Elastic's base;
//   - every client hook a spec may add (not planned_only) under FedAvg and under
//     SCAFFOLD (a stateful aggregator), except where the aggregator plans it itself;
//   - aggregators with non-default options that change their state.
// Each run must accept every update (a composition that rejects returning clients
// fails here), stay finite, send bytes, and give identical weights and metrics for
// 1 and 3 workers. The cases come from the registries, so a new plugin is enrolled
// by linking it into :all.
//
// A hook that never ran passes all that, so every client hook also declares what
// it observably does (KnownEffects: extras, loss term, held-out examples, state),
// and HookEffectsTest looks for each effect in runs through the same runner with
// the aggregator wrapped in a probe that records what reaches the server.

#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "fl/aggregator.h"
#include "fl/checkpoint.h"
#include "fl/client_hook.h"
#include "fl/client_state_store.h"
#include "fl/experiment.h"
#include "fl/personalization.h"
#include "fl/registry.h"
#include "fl/spec_loader.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

constexpr char kBaseSpec[] = R"pb(
  name: "composition"
  seed: 3
  device: CPU
  dataset {
    name: "fashion_mnist"
    options {
      [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 400 test_limit: 300 }
    }
  }
  partition { name: "iid" num_clients: 4 }
  model {
    name: "mlp"
    options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [16] } }
  }
  client { steps: 3 batch_size: 16 optimizer { kind: SGD lr: 0.05 } }
  server { rounds: 2 clients_per_round: 3 proxy { split: TEST size: 50 } }
)pb";

struct Case {
  std::string name;
  // Merged into kBaseSpec.
  std::string overrides;
  // Sends less than whole models and deltas (a lossy codec).
  bool compressed = false;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string Aggregator(const std::string& name, const std::string& options_type = "",
                       const std::string& options = "") {
  if (options_type.empty()) return absl::StrCat("aggregator { name: '", name, "' }");
  return absl::StrCat("aggregator { name: '", name, "' options { [type.googleapis.com/fedkit.",
                      "aggregators.", options_type, "] { ", options, " } } }");
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const auto& aggregators = fl::Registry<fl::Aggregator>::Global();
  for (const std::string& base : aggregators.Names()) {
    if (base == "elastic") continue;  // cannot wrap itself (the conformance suite checks)
    // dp_fedavg with its noise from the seed, as below.
    const std::string base_options =
        base == "dp_fedavg"
            ? " options { [type.googleapis.com/fedkit.aggregators.DpFedAvgOptions] { "
              "reproducible_noise: true } }"
            : "";
    cases.push_back({"elastic_over_" + base,
                     Aggregator("elastic", "ElasticOptions",
                                "base { name: '" + base + "'" + base_options + " }")});
  }
  // Under differential privacy, every base that declares its sums' sensitivities,
  // with adaptive clipping (the default) and with a fixed clip. Noise from the
  // seed: the suite compares runs, and noise from the OS differs by design.
  for (const std::string& base : aggregators.Names()) {
    auto created = aggregators.Create(base, google::protobuf::Any());
    if (!created.ok() || (*created)->properties().dp_sums.empty()) continue;
    cases.push_back({"dp_fedavg_over_" + base,
                     Aggregator("dp_fedavg", "DpFedAvgOptions",
                                "reproducible_noise: true base { name: '" + base + "' }")});
    cases.push_back({"dp_fedavg_fixed_clip_over_" + base,
                     Aggregator("dp_fedavg", "DpFedAvgOptions",
                                "reproducible_noise: true clip_norm: 0.5 noise_multiplier: 0.5 "
                                "base { name: '" + base + "' }")});
  }
  cases.push_back({"dp_fedavg_local", Aggregator("dp_fedavg", "DpFedAvgOptions",
                                                 "reproducible_noise: true mode: LOCAL "
                                                 "clip_norm: 0.5 noise_multiplier: 0.1")});
  const auto& hooks = fl::Registry<fl::ClientHook>::Global();
  for (const std::string& hook : hooks.Names()) {
    auto created = hooks.Create(hook, google::protobuf::Any());
    if (!created.ok() || (*created)->planned_only()) continue;
    for (const char* under : {"fedavg", "scaffold"}) {
      auto aggregator = aggregators.Create(under, google::protobuf::Any());
      if (aggregator.ok() &&
          absl::c_linear_search((*aggregator)->properties().client_hooks, hook)) {
        continue;  // it already runs under its own aggregator
      }
      cases.push_back({hook + "_under_" + under,
                       absl::StrCat(Aggregator(under), " client { hooks { name: '", hook,
                                    "' } }")});
    }
  }
  cases.push_back({"scaffold_option_i",
                   Aggregator("scaffold", "ScaffoldOptions", "control_variate_update: OPTION_I")});
  cases.push_back({"scaffold_exp",
                   Aggregator("scaffold", "ScaffoldOptions", "extrapolation { epsilon: 0.01 }")});
  cases.push_back({"fedexp_paper_form",
                   Aggregator("fedexp", "FedExpOptions", "epsilon_form: PAPER epsilon: 0.01")});
  cases.push_back({"fedlaw_swa",
                   Aggregator("fedlaw", "FedLawOptions", "swa: true server_epochs: 4")});
  // EFL's client term under other server steps, from the spec alone.
  for (const char* base : {"fedexp", "scaffold", "fedadam"}) {
    cases.push_back({absl::StrCat("efl_over_", base),
                     Aggregator("efl", "EflOptions",
                                absl::StrCat("client { lambda: 0.1 } base { name: '", base, "' }"))});
  }
  cases.push_back({"efl_stragglers_compressed_both_ways",
                   absl::StrCat(Aggregator("efl"),
                                " client { system { straggler_fraction: 0.5 } upload { kind: "
                                "SPARSE_TERNARY fraction: 0.1 error_feedback: true } }"
                                " server { incomplete_updates: SCALE download { kind: "
                                "SPARSE_TERNARY fraction: 0.1 error_feedback: true } }"),
                   /*compressed=*/true});
  // Partial sharing (personalised FL) over server steps whose client hooks and
  // broadcasts are shaped like the model: they see the shared part only.
  for (const char* base : {"scaffold", "fedexp", "fedadam"}) {
    cases.push_back({absl::StrCat("fedper_over_", base),
                     Aggregator("fedper", "PartialSharingOptions",
                                absl::StrCat("base { name: '", base, "' }"))});
  }
  cases.push_back({"fedbabu_over_scaffold", Aggregator("fedbabu", "FedBabuOptions",
                                                       "base { name: 'scaffold' }")});
  // FedRep's phases under SCAFFOLD (its correction, over the shared parameters,
  // acts in the body's phase); Ditto's personal model beside SCAFFOLD's training
  // of the global one; methods that take their own steps with another hook's loss
  // term in their gradients (SCAFFOLD's correction, FedProx's pull).
  cases.push_back({"fedrep_over_scaffold",
                   Aggregator("fedrep", "FedRepOptions",
                              "personal_groups: 'head' personal_epochs: 2 base { name: 'scaffold' }")});
  cases.push_back({"ditto_over_scaffold",
                   Aggregator("ditto", "DittoOptions", "base { name: 'scaffold' }")});
  cases.push_back({"per_fedavg_over_scaffold",
                   Aggregator("per_fedavg", "PerFedAvgOptions",
                              "client { variant: HESSIAN_FREE } base { name: 'scaffold' }")});
  cases.push_back({"pfedme_with_fedprox",
                   absl::StrCat(Aggregator("pfedme"), " client { hooks { name: 'fedprox' } }")});
  cases.push_back({"fedbn_with_fedprox",
                   absl::StrCat(Aggregator("fedbn"), " client { hooks { name: 'fedprox' } }")});
  // FedBN keeps the normalisation layers: the model needs some.
  for (Case& c : cases) {
    if (absl::StrContains(c.name, "fedbn")) {
      absl::StrAppend(&c.overrides, " model { options { [type.googleapis.com/fedkit.models."
                                    "MlpOptions] { hidden: [16] batch_norm: true } } }");
    }
  }
  return cases;
}

// Under every case: clients of unequal sizes, and half of them stragglers each
// round (s of the 3 steps, s uniform in {1, 2, 3}), so that methods that weigh
// by data size or read the local step counts are composed where these differ.
constexpr char kHeterogeneity[] = R"pb(
  partition {
    name: "unbalanced"
    options {
      [type.googleapis.com/fedkit.data.UnbalancedOptions] { log_normal_sigma: 0.5 min_size: 40 }
    }
  }
  client { system { straggler_fraction: 0.5 } }
)pb";

class CompositionTest : public ::testing::TestWithParam<Case> {
 protected:
  fl::ExperimentResult Run(int workers) {
    auto spec = fl::ParseSpec(kBaseSpec, "kBaseSpec");
    EXPECT_TRUE(spec.ok()) << spec.status();
    absl::Status merged = fl::ApplyOverride(
        absl::StrCat(kHeterogeneity, GetParam().overrides, " simulation { workers: ", workers,
                     " }"),
        *spec);
    EXPECT_TRUE(merged.ok()) << merged;
    auto experiment = fl::BuildExperiment(*spec);
    EXPECT_TRUE(experiment.ok()) << experiment.status();
    if (!experiment.ok()) return {};
    unshared_ = {experiment->personal_tensors.begin(), experiment->personal_tensors.end()};
    unshared_.insert(experiment->frozen_tensors.begin(), experiment->frozen_tensors.end());
    auto result = fl::RunExperiment(
        *experiment, absl::StrCat(getenv("TEST_TMPDIR"), "/", GetParam().name, "_w", workers));
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *std::move(result) : fl::ExperimentResult();
  }
  // What goes up and down: the model without the tensors it does not share.
  int64_t SharedBytes(const fl::ExperimentResult& result) const {
    return result.final_model.Without(unshared_).NumBytes();
  }

  std::set<std::string> unshared_;
};

TEST_P(CompositionTest, EveryUpdateAcceptedFiniteAndIndependentOfWorkers) {
  const fl::ExperimentResult one = Run(1);
  const fl::ExperimentResult three = Run(3);
  ASSERT_EQ(one.rows.size(), 2u);
  ASSERT_EQ(three.rows.size(), 2u);
  int64_t bytes_up = 0;
  for (size_t r = 0; r < one.rows.size(); ++r) {
    const fl::MetricsRow& row = one.rows[r];
    EXPECT_EQ(row.clients, 3) << "round " << row.round;
    EXPECT_EQ(row.rejected, 0) << "round " << row.round;
    EXPECT_TRUE(std::isfinite(row.test_loss)) << "round " << row.round;
    EXPECT_TRUE(std::isfinite(row.train_loss)) << "round " << row.round;
    // Every round sends the model down to 3 clients and at least a delta up (less,
    // but something, when compressed).
    EXPECT_GE(row.bytes_up - bytes_up,
              GetParam().compressed ? 3 : 3 * SharedBytes(one))
        << "round " << row.round;
    bytes_up = row.bytes_up;
    const fl::MetricsRow& other = three.rows[r];
    EXPECT_EQ(row.test_accuracy, other.test_accuracy) << "round " << row.round;
    EXPECT_EQ(row.test_loss, other.test_loss) << "round " << row.round;
    EXPECT_EQ(row.train_loss, other.train_loss) << "round " << row.round;
    EXPECT_EQ(row.bytes_up, other.bytes_up) << "round " << row.round;
    EXPECT_EQ(row.bytes_down, other.bytes_down) << "round " << row.round;
    EXPECT_EQ(row.diagnostics, other.diagnostics) << "round " << row.round;
  }
  if (!GetParam().compressed) {
    EXPECT_EQ(one.rows.back().bytes_down % (2 * 3), 0);
    EXPECT_GE(one.rows.back().bytes_down, 2 * 3 * SharedBytes(one));
  }
  EXPECT_TRUE(one.final_model.AllFinite());
  ASSERT_TRUE(one.final_model.CheckSameLayout(three.final_model).ok());
  for (size_t i = 0; i < one.final_model.size(); ++i) {
    EXPECT_TRUE(one.final_model.tensor(i).equal(three.final_model.tensor(i)))
        << one.final_model.entries()[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, CompositionTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// ---------------------------------------------------------------------------
// What each client hook observably does.

// kBaseSpec's federation: 400 training examples split evenly over 4 IID clients,
// with labels of all 10 classes.
constexpr int64_t kShare = 100;
constexpr int64_t kTrainingExamples = 400;
constexpr int64_t kClasses = 10;

// An update as it reached the aggregator, with the model its round started from.
struct Arrival {
  int round = 0;
  fl::ClientUpdate update;
  fl::ModelState global;
};

// The experiment's aggregator, wrapped: records every update handed to it, and
// refuses those of client `refused` (the server then rejects them, as it does an
// update the method cannot use).
class Probe : public fl::Aggregator {
 public:
  Probe(std::unique_ptr<fl::Aggregator> inner, int64_t refused, std::vector<Arrival>* arrivals)
      : inner_(std::move(inner)), refused_(refused), arrivals_(arrivals) {}

  fl::AggregatorProperties properties() const override { return inner_->properties(); }
  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    round_ = context.round;
    global_ = global.Clone();
    return inner_->Configure(global, context);
  }
  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    if (update.client_id == refused_) return absl::InvalidArgumentError("refused by the probe");
    arrivals_->push_back({round_, fl::CloneUpdate(update), global_});
    return inner_->Accumulate(std::move(update), context);
  }
  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    return inner_->Finalize(global, context);
  }
  std::optional<std::map<std::string, at::Tensor>> PartialSums() const override {
    return inner_->PartialSums();
  }
  absl::Status MergePartialSums(std::map<std::string, at::Tensor> sums) override {
    return inner_->MergePartialSums(std::move(sums));
  }
  std::map<std::string, at::Tensor> SaveState() const override { return inner_->SaveState(); }
  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state) override {
    return inner_->RestoreState(state);
  }

 private:
  std::unique_ptr<fl::Aggregator> inner_;
  const int64_t refused_;
  std::vector<Arrival>* arrivals_;
  int round_ = 0;
  fl::ModelState global_;
};

// A run through the real runner (1 worker) with the probe in place.
struct ProbedRun {
  std::vector<Arrival> arrivals;
  std::vector<fl::MetricsRow> rows;
  // The clients' committed hook states after the last round (its checkpoint).
  std::map<fl::ClientStateStore::Key, fl::TensorMap> states;

  std::vector<const Arrival*> InRound(int round) const {
    std::vector<const Arrival*> found;
    for (const Arrival& a : arrivals) {
      if (a.round == round) found.push_back(&a);
    }
    return found;
  }
  const Arrival* Find(int round, int64_t client) const {
    for (const Arrival& a : arrivals) {
      if (a.round == round && a.update.client_id == client) return &a;
    }
    return nullptr;
  }
  const fl::TensorMap* State(int64_t client, const std::string& hook) const {
    auto it = states.find({client, hook});
    return it == states.end() ? nullptr : &it->second;
  }
};

// Runs are shared by the tests of a case: keyed by overrides, rounds and the
// refused client.
const ProbedRun& RunProbed(const std::string& overrides, int rounds, int64_t refused = -1) {
  static auto* runs = new std::map<std::tuple<std::string, int, int64_t>, ProbedRun>;
  const auto key = std::make_tuple(overrides, rounds, refused);
  if (auto it = runs->find(key); it != runs->end()) return it->second;
  ProbedRun& run = (*runs)[key];
  auto spec = fl::ParseSpec(kBaseSpec, "kBaseSpec");
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return run;
  const absl::Status merged = fl::ApplyOverride(
      absl::StrCat(overrides, " server { rounds: ", rounds,
                   " } simulation { workers: 1 } output { checkpoint_every: 1 }"),
      *spec);
  EXPECT_TRUE(merged.ok()) << merged;
  auto experiment = fl::BuildExperiment(*spec);
  EXPECT_TRUE(experiment.ok()) << experiment.status();
  if (!experiment.ok()) return run;
  experiment->aggregator =
      std::make_unique<Probe>(std::move(experiment->aggregator), refused, &run.arrivals);
  const std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/probed_", runs->size());
  auto result = fl::RunExperiment(*experiment, dir);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return run;
  run.rows = result->rows;
  auto checkpoint = fl::ReadCheckpoint(absl::StrCat(dir, "/", fl::kCheckpointFile), at::kCPU);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  if (checkpoint.ok()) run.states = std::move(checkpoint->client_states);
  return run;
}

// An extra's layout is the model's parameters (names and shapes, in order), its
// values finite and not all zero.
void ExpectParameterLayout(const fl::ModelState& extra, const Arrival& arrival) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected, actual;
  for (const auto& e : arrival.global.entries()) {
    if (!e.is_buffer) expected.push_back({e.name, e.tensor.sizes().vec()});
  }
  for (const auto& e : extra.entries()) actual.push_back({e.name, e.tensor.sizes().vec()});
  EXPECT_EQ(actual, expected);
  EXPECT_TRUE(extra.AllFinite());
  EXPECT_GT(extra.SquaredNorm(), 0.0);
}

void ExpectNonNegative(const fl::ModelState& extra) {
  for (size_t i = 0; i < extra.size(); ++i) {
    EXPECT_GE(extra.tensor(i).min().item<double>(), 0.0) << extra.entries()[i].name;
  }
}

// Checks one extra (the argument) of an update as it arrived.
using ExtraCheck = std::function<void(const fl::ModelState&, const Arrival&)>;

// What a client hook observably does.
struct HookEffects {
  // The extras it adds to the update, each checked on every update that arrives.
  std::map<std::string, ExtraCheck> extras;
  // Its loss term pulls local training towards the global model: the update
  // differs from the one the same client sends in the same run without the hook,
  // by a step against it (checked where the hook can be left out of a run).
  bool pulls_to_global = false;
  // The share of every client's examples it holds out of local training.
  double holds_out = 0.0;
  enum class State {
    kNone,
    // The indices of the examples it holds out: drawn in the client's first
    // accepted round, kept from then on.
    kHeldOutIndices,
    // Per parameter, the sum of the extra `summed_extra` over the client's
    // accepted rounds (it advances every round).
    kSumOfExtra,
    // A whole model of the client's own (Ditto's v_k), in the store's
    // kPersonalSlot: the global model's layout, trained away from it and from the
    // model the client uploads.
    kPersonalModel,
  };
  State state = State::kNone;
  std::string summed_extra;
  // The store slot the state lives in; empty: the hook's name.
  std::string slot;
};

// Every registered client hook's effects (EveryHookDeclaresItsEffects).
const std::map<std::string, HookEffects>& KnownEffects() {
  static const auto* known = [] {
    auto* effects = new std::map<std::string, HookEffects>;
    using State = HookEffects::State;

    (*effects)["class_counts"].extras["class_counts"] = [](const fl::ModelState& extra,
                                                           const Arrival&) {
      ASSERT_EQ(extra.size(), 1u);
      const at::Tensor& counts = extra.tensor(0);
      EXPECT_EQ(extra.entries()[0].name, "counts");
      EXPECT_EQ(counts.scalar_type(), at::kLong);
      EXPECT_EQ(counts.sizes().vec(), std::vector<int64_t>{kClasses});
      EXPECT_GE(counts.min().item<int64_t>(), 0);
      EXPECT_EQ(counts.sum().item<int64_t>(), kShare) << "it counts the client's whole share";
      EXPECT_GE(counts.gt(0).sum().item<int64_t>(), 2) << counts;
    };

    // Adaptive clipping's report: was the update within this round's C?
    (*effects)["dp_clip"].extras["dp_clip/within_bound"] = [](const fl::ModelState& extra,
                                                              const Arrival&) {
      ASSERT_EQ(extra.size(), 1u);
      const double within = extra.tensor(0).item<double>();
      EXPECT_TRUE(within == 0.0 || within == 1.0) << within;
    };

    HookEffects& efl = (*effects)["efl"];
    efl.extras["efl_u"] = [](const fl::ModelState& u, const Arrival& arrival) {
      ExpectParameterLayout(u, arrival);
      ExpectNonNegative(u);  // a Fisher diagonal
    };
    // v_k = u_k (.) w_k at the client's final weights w_k = global + delta.
    efl.extras["efl_v"] = [](const fl::ModelState& v, const Arrival& arrival) {
      ExpectParameterLayout(v, arrival);
      const fl::ModelState& u = arrival.update.extras.at("efl_u");
      size_t p = 0;
      for (size_t i = 0; i < arrival.global.size() && p < v.size(); ++i) {
        if (arrival.global.entries()[i].is_buffer) continue;
        const at::Tensor w = arrival.global.tensor(i) + arrival.update.delta.tensor(i);
        const at::Tensor expected = u.tensor(p) * w;
        const double scale = expected.abs().max().item<double>();
        EXPECT_LE((v.tensor(p) - expected).abs().max().item<double>(), 1e-6 * scale)
            << v.entries()[p].name;
        ++p;
      }
    };

    HookEffects& elastic = (*effects)["elastic"];
    elastic.extras["elastic/omega"] = [](const fl::ModelState& omega, const Arrival& arrival) {
      ExpectParameterLayout(omega, arrival);
      ExpectNonNegative(omega);  // an average of |gradient|
    };
    elastic.holds_out = 0.3;
    elastic.state = State::kHeldOutIndices;

    (*effects)["fedexp"].extras["fedexp/sq_norm"] = [](const fl::ModelState& extra,
                                                       const Arrival& arrival) {
      ASSERT_EQ(extra.size(), 1u);
      EXPECT_EQ(extra.tensor(0).scalar_type(), at::kDouble);
      ASSERT_EQ(extra.tensor(0).numel(), 1);
      const double sent = extra.tensor(0).item<double>();
      EXPECT_GT(sent, 0.0);
      EXPECT_DOUBLE_EQ(sent, arrival.update.delta.SquaredNorm()) << "||delta||^2 of the update";
    };

    (*effects)["fedprox"].pulls_to_global = true;

    // Personal models, kept on the clients: Ditto's v_k, pFedMe's theta, APFL's
    // v_bar (APFL's v and alpha in its own slot: the hook conformance suite).
    for (const char* hook : {"ditto", "pfedme", "apfl"}) {
      HookEffects& personal = (*effects)[hook];
      personal.state = State::kPersonalModel;
      personal.slot = fl::kPersonalSlot;
    }
    // Per-FedAvg's meta-steps: nothing sent or kept beyond the update.
    (*effects)["per_fedavg"];

    HookEffects& holdout = (*effects)["holdout"];
    holdout.holds_out = 0.3;
    holdout.state = State::kHeldOutIndices;

    // One factor G {d, r} per layer but the classifier, d the layer's inputs (+1
    // for its bias), named "<weight>|<bias>".
    (*effects)["maecho"].extras["maecho"] = [](const fl::ModelState& factors,
                                               const Arrival& arrival) {
      std::vector<std::string> layers;
      std::map<std::string, at::Tensor> parameters;
      for (const auto& e : arrival.global.entries()) {
        if (e.is_buffer) continue;
        parameters[e.name] = e.tensor;
        if (e.tensor.dim() == 2) layers.push_back(e.name);
      }
      ASSERT_FALSE(layers.empty());
      layers.pop_back();  // the classifier
      ASSERT_EQ(factors.size(), layers.size());
      for (size_t l = 0; l < layers.size(); ++l) {
        const std::string& name = factors.entries()[l].name;
        const std::string weight = name.substr(0, name.find('|'));
        EXPECT_EQ(weight, layers[l]);
        ASSERT_TRUE(parameters.count(weight)) << name;
        const int64_t d = parameters[weight].size(1) + (name.find('|') != std::string::npos);
        const at::Tensor& g = factors.tensor(l);
        ASSERT_EQ(g.dim(), 2) << name;
        EXPECT_EQ(g.size(0), d) << name;
        EXPECT_GE(g.size(1), 1) << name;
        EXPECT_LE(g.size(1), d) << name;
      }
      EXPECT_TRUE(factors.AllFinite());
      EXPECT_GT(factors.SquaredNorm(), 0.0);
    };

    // c_i advances by the c_i+ - c_i it sends (option II, the default).
    HookEffects& scaffold = (*effects)["scaffold"];
    scaffold.extras["scaffold/delta_c"] = ExpectParameterLayout;
    scaffold.state = State::kSumOfExtra;
    scaffold.summed_extra = "scaffold/delta_c";
    return effects;
  }();
  return *known;
}

// A hook under an aggregator: added through client.hooks (`added`), or planned by
// the aggregator (hooks that only work under their own aggregator).
struct EffectCase {
  std::string hook;
  std::string aggregator;  // empty: no registered aggregator plans the hook
  bool added = false;
};

void PrintTo(const EffectCase& c, std::ostream* os) { *os << c.hook << "_under_" << c.aggregator; }

// The hooks `aggregator` plans with its default options.
std::vector<std::string> PlannedHooks(const std::string& aggregator) {
  auto created = fl::Registry<fl::Aggregator>::Global().Create(aggregator, google::protobuf::Any());
  return created.ok() ? (*created)->properties().client_hooks : std::vector<std::string>();
}

// Every hook a spec may add, under FedAvg and SCAFFOLD as in Cases(); every other
// hook under the first registered aggregator that plans it.
std::vector<EffectCase> EffectCases() {
  std::vector<EffectCase> cases;
  const auto& hooks = fl::Registry<fl::ClientHook>::Global();
  for (const std::string& hook : hooks.Names()) {
    auto created = hooks.Create(hook, google::protobuf::Any());
    if (created.ok() && !(*created)->planned_only()) {
      for (const char* under : {"fedavg", "scaffold"}) {
        if (!absl::c_linear_search(PlannedHooks(under), hook)) cases.push_back({hook, under, true});
      }
      continue;
    }
    EffectCase planned{hook, "", false};
    for (const std::string& name : fl::Registry<fl::Aggregator>::Global().Names()) {
      if (absl::c_linear_search(PlannedHooks(name), hook)) {
        planned.aggregator = name;
        break;
      }
    }
    cases.push_back(planned);
  }
  return cases;
}

class HookEffectsTest : public ::testing::TestWithParam<EffectCase> {
 protected:
  void SetUp() override {
    const EffectCase& c = GetParam();
    ASSERT_TRUE(KnownEffects().count(c.hook))
        << "client hook \"" << c.hook << "\" is not in KnownEffects()";
    effects_ = &KnownEffects().at(c.hook);
    ASSERT_FALSE(c.aggregator.empty()) << "no registered aggregator plans \"" << c.hook << "\"";
    overrides_ = Aggregator(c.aggregator);
    run_hooks_ = PlannedHooks(c.aggregator);
    if (c.added) {
      absl::StrAppend(&overrides_, " client { hooks { name: '", c.hook, "' } }");
      run_hooks_.push_back(c.hook);
    }
    for (const std::string& hook : run_hooks_) {
      ASSERT_TRUE(KnownEffects().count(hook))
          << "client hook \"" << hook << "\" is not in KnownEffects()";
    }
  }

  const HookEffects* effects_ = nullptr;
  std::string overrides_;
  std::vector<std::string> run_hooks_;  // every hook the run's clients run
};

// A new hook must say what to look for.
TEST(HookEffects, EveryHookDeclaresItsEffects) {
  const std::vector<std::string> names = fl::Registry<fl::ClientHook>::Global().Names();
  for (const std::string& hook : names) {
    EXPECT_TRUE(KnownEffects().count(hook))
        << "client hook \"" << hook << "\" has no entry in KnownEffects(): declare what it "
        << "observably does (extras, loss term, held-out examples, state), so that this test "
        << "can tell a run where it worked from one where it never ran";
  }
  for (const auto& [hook, effects] : KnownEffects()) {
    EXPECT_TRUE(absl::c_linear_search(names, hook)) << "\"" << hook << "\" is not registered";
  }
}

// The update that reaches the server carries exactly the extras of the run's
// hooks, each as its hook promises, and was trained on the examples they leave.
TEST_P(HookEffectsTest, ExtrasArriveAndExamplesAreHeldOut) {
  const ProbedRun& run = RunProbed(overrides_, 2);
  ASSERT_EQ(run.rows.size(), 2u);
  std::set<std::string> expected_extras;
  int64_t held_out = 0;
  for (const std::string& hook : run_hooks_) {
    const HookEffects& effects = KnownEffects().at(hook);
    for (const auto& [name, check] : effects.extras) expected_extras.insert(name);
    held_out += static_cast<int64_t>(std::floor(effects.holds_out * kShare));
  }
  ASSERT_EQ(run.arrivals.size(), 6u) << "3 clients a round, every update accepted";
  for (const Arrival& arrival : run.arrivals) {
    SCOPED_TRACE(absl::StrCat("round ", arrival.round, ", client ", arrival.update.client_id));
    std::set<std::string> extras;
    for (const auto& [name, extra] : arrival.update.extras) extras.insert(name);
    EXPECT_EQ(extras, expected_extras);
    for (const auto& [name, check] : effects_->extras) {
      auto extra = arrival.update.extras.find(name);
      if (extra == arrival.update.extras.end()) continue;  // reported above
      SCOPED_TRACE(absl::StrCat("extra \"", name, "\""));
      check(extra->second, arrival);
    }
    EXPECT_EQ(arrival.update.num_examples, kShare - held_out);
  }
}

// Against the same round without the hook (same global model, batches and
// seeds): a loss term that pulls towards the global model shortens the update; a
// hook that holds examples out changes it; any other leaves it bit for bit.
TEST_P(HookEffectsTest, TrainingChangesOnlyAsDeclared) {
  if (!GetParam().added) GTEST_SKIP() << "its aggregator cannot run without it";
  const ProbedRun& with = RunProbed(overrides_, 1);
  const ProbedRun& without = RunProbed(Aggregator(GetParam().aggregator), 1);
  ASSERT_EQ(with.arrivals.size(), 3u);
  ASSERT_EQ(without.arrivals.size(), 3u);
  for (const Arrival& arrival : with.arrivals) {
    const Arrival* alone = without.Find(1, arrival.update.client_id);
    ASSERT_NE(alone, nullptr) << "the same cohort";
    SCOPED_TRACE(absl::StrCat("client ", arrival.update.client_id));
    const fl::ModelState& delta = arrival.update.delta;
    const fl::ModelState& base = alone->update.delta;
    const fl::ModelState change = fl::ModelState::Difference(delta, base);
    if (effects_->pulls_to_global) {
      EXPECT_GT(change.SquaredNorm(), 0.0) << "the loss term changed nothing";
      EXPECT_LT(change.Dot(base), 0.0) << "the loss term does not pull towards the global model";
    } else if (effects_->holds_out > 0) {
      EXPECT_GT(change.SquaredNorm(), 0.0) << "training on fewer examples changed nothing";
    } else {
      for (size_t i = 0; i < delta.size(); ++i) {
        EXPECT_TRUE(delta.tensor(i).equal(base.tensor(i))) << delta.entries()[i].name;
      }
    }
  }
}

// The hook's per-client state as declared, committed only for accepted updates:
// after round 1 (alone, and with one client's update refused) and after round 2.
TEST_P(HookEffectsTest, StateAsDeclaredAndCommittedOnlyWhenAccepted) {
  using State = HookEffects::State;
  const std::string& hook = GetParam().hook;
  const std::string& slot = effects_->slot.empty() ? hook : effects_->slot;
  const ProbedRun& one = RunProbed(overrides_, 1);
  const ProbedRun& two = RunProbed(overrides_, 2);
  ASSERT_EQ(one.arrivals.size(), 3u);
  ASSERT_EQ(two.arrivals.size(), 6u);
  if (effects_->state == State::kNone) {
    for (const ProbedRun* run : {&one, &two}) {
      for (const auto& [key, state] : run->states) {
        EXPECT_NE(key.second, slot) << "client " << key.first << " holds state of a stateless hook";
      }
    }
    return;
  }
  // What a client's state should be after `update` was accepted, given `before`
  // (nullptr: none yet).
  auto expect_after = [&](const fl::TensorMap* before, const fl::TensorMap& after,
                          const Arrival& arrival) {
    SCOPED_TRACE(absl::StrCat("round ", arrival.round, ", client ", arrival.update.client_id));
    if (effects_->state == State::kHeldOutIndices) {
      ASSERT_EQ(after.size(), 1u);
      const at::Tensor& indices = after.begin()->second;
      EXPECT_EQ(indices.scalar_type(), at::kLong);
      EXPECT_EQ(indices.numel(), kShare - arrival.update.num_examples) << "the examples held out";
      EXPECT_EQ(std::get<0>(at::_unique(indices)).numel(), indices.numel()) << "distinct";
      EXPECT_GE(indices.min().item<int64_t>(), 0);
      EXPECT_LT(indices.max().item<int64_t>(), kTrainingExamples);
      if (before != nullptr) {
        ASSERT_EQ(before->size(), 1u);
        EXPECT_TRUE(before->begin()->second.equal(indices)) << "drawn again";
      }
      return;
    }
    if (effects_->state == State::kPersonalModel) {
      ASSERT_EQ(after.size(), arrival.global.size());
      double from_local = 0;
      for (size_t i = 0; i < arrival.global.size(); ++i) {
        const fl::ModelState::Entry& e = arrival.global.entries()[i];
        ASSERT_TRUE(after.count(e.name)) << e.name;
        const at::Tensor& own = after.at(e.name);
        ASSERT_EQ(own.sizes(), e.tensor.sizes()) << e.name;
        EXPECT_TRUE(own.isfinite().all().item<bool>()) << e.name;
        from_local += (own - (e.tensor + arrival.update.delta.tensor(i))).abs().max().item<double>();
      }
      EXPECT_GT(from_local, 0.0) << "the personal model is the uploaded one";
      return;
    }
    const fl::ModelState& sent = arrival.update.extras.at(effects_->summed_extra);
    ASSERT_EQ(after.size(), sent.size());
    for (const auto& e : sent.entries()) {
      ASSERT_TRUE(after.count(e.name)) << e.name;
      const at::Tensor expected = before == nullptr ? e.tensor : before->at(e.name) + e.tensor;
      EXPECT_TRUE(after.at(e.name).allclose(expected, 1e-6, 1e-7)) << e.name;
    }
  };
  // Round 1: the state of exactly the round's clients.
  for (const Arrival* arrival : one.InRound(1)) {
    const fl::TensorMap* state = one.State(arrival->update.client_id, slot);
    ASSERT_NE(state, nullptr) << "no state committed for client " << arrival->update.client_id;
    expect_after(nullptr, *state, *arrival);
  }
  for (const auto& [key, state] : one.states) {
    if (key.second != slot) continue;
    EXPECT_NE(one.Find(1, key.first), nullptr) << "state for client " << key.first;
  }
  // Round 2 continues from round 1's states; clients not in it keep theirs.
  for (int64_t client = 0; client < 4; ++client) {
    SCOPED_TRACE(absl::StrCat("client ", client, " after round 2"));
    const fl::TensorMap* before = one.State(client, slot);
    const fl::TensorMap* after = two.State(client, slot);
    const Arrival* arrival = two.Find(2, client);
    if (arrival != nullptr) {
      ASSERT_NE(after, nullptr);
      expect_after(before, *after, *arrival);
    } else if (before == nullptr) {
      EXPECT_EQ(after, nullptr);
    } else {
      ASSERT_NE(after, nullptr);
      ASSERT_EQ(after->size(), before->size());
      for (const auto& [name, tensor] : *before) EXPECT_TRUE(after->at(name).equal(tensor)) << name;
    }
  }
  // Round 1 again, one update refused: that client keeps no state, the others
  // theirs.
  const int64_t refused = one.arrivals.front().update.client_id;
  const ProbedRun& refusing = RunProbed(overrides_, 1, refused);
  ASSERT_EQ(refusing.rows.size(), 1u);
  EXPECT_EQ(refusing.rows[0].rejected, 1);
  EXPECT_EQ(refusing.State(refused, slot), nullptr)
      << "client " << refused << "'s state was committed though its update was rejected";
  for (const Arrival* arrival : refusing.InRound(1)) {
    const fl::TensorMap* state = refusing.State(arrival->update.client_id, slot);
    const fl::TensorMap* alone = one.State(arrival->update.client_id, slot);
    ASSERT_NE(state, nullptr);
    ASSERT_NE(alone, nullptr);
    for (const auto& [name, tensor] : *alone) EXPECT_TRUE(state->at(name).equal(tensor)) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, HookEffectsTest, ::testing::ValuesIn(EffectCases()),
                         [](const auto& info) {
                           return absl::StrCat(info.param.hook, "_under_",
                                               info.param.aggregator.empty()
                                                   ? std::string("nothing")
                                                   : info.param.aggregator);
                         });

}  // namespace
}  // namespace aggregators
