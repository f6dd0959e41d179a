// FedLAW (Li, Lin, Shang & Wu, "Revisiting Weighted Aggregation in Federated
// Learning with Neural Networks", ICML 2023, Algorithm 1): every round the server
// learns a global shrinking factor gamma and relative weights lambda over the
// round's client models theta_i = w + delta_i on a small labelled proxy set (Eq. 8),
//   (gamma*, lambda*) = argmin L_proxy(gamma * sum_i lambda_i theta_i),
// and the new global model is gamma* sum_i lambda*_i theta_i (Eq. 3). As in the
// official code (server_funct.py; docs/fedlaw.md, section 3): gamma = exp(g), lambda =
// softmax(a) (or the quad maps), a_i = log of the round's renormalised size weights
// and g = 0 at the start of every round (so the search starts from FedAvg), Adam
// (lr 0.005, betas 0.5/0.999) with StepLR(20, 0.5) for Es = 20 epochs over shuffled
// proxy minibatches of 128; `learn` gives the paper's adaptive GWS (gamma only, Eq.
// 5) and attentive LAW (lambda only, Eq. 7); `swa` the code's two-stage SWA variant.
//
// No re-parameterised model: theta_hat is loaded into one ordinary server model,
// one forward/backward pass gives G = dL/dtheta_hat, and the (a, g) gradient
// follows from N + 1 dot products (fedlaw_weights.h). The client models are kept as
// one [N, P] matrix of parameter deltas, sorted by client id so the result does not
// depend on arrival order.
// Distributed runs gather the round's updates to one process (no partial sums).
//
// BatchNorm: running statistics are not aggregated. The server model runs in train
// mode during the optimisation, so its buffers move with the proxy batches, and the
// new global carries them; the next round starts from the global's buffers, which
// are the server's (so they persist without separate aggregator state). Diagnostics
// per round: gamma, lambda_entropy (nats), lambda_max, proxy_loss_before (FedAvg's
// weights) and proxy_loss_after (eval mode, whole proxy set). gamma is unbounded, as
// in the code.
//
// Needs server.proxy (the official setting: 200 class-balanced TEST images) and
// plans the "holdout" client hook (30% of every client's data never trained on).
//
//   server { proxy { split: TEST size: 200 } }
//   aggregator {
//     name: "fedlaw"
//     options {
//       [type.googleapis.com/fedkit.aggregators.FedLawOptions] {
//         parameterization: EXP  learn: BOTH  server_epochs: 20  lr: 0.005
//         # swa: true                       # the SWA two-stage variant
//         client_holdout_fraction: 0.3
//       }
//     }
//   }

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/common/proxy_training.h"
#include "aggregators/fedlaw/fedlaw_options.pb.h"
#include "aggregators/fedlaw/fedlaw_weights.h"
#include "aggregators/holdout/holdout_options.pb.h"
#include "fl/aggregator.h"
#include "fl/batch_order_file.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::FedLawOptions;
using fedlaw::Cohort;
using fedlaw::Parameterization;
using fedlaw::Weights;

struct FedLawConfig {
  Parameterization parameterization = Parameterization::kExp;
  bool learn_gamma = true;
  bool learn_lambda = true;
  int server_epochs = 20;
  double lr = 0.005;
  double beta1 = 0.5;
  double beta2 = 0.999;
  double eps = 1e-8;
  int64_t batch_size = 128;
  bool swa = false;
  bool swa_gamma_first = false;
  double holdout_fraction = 0.3;
  bool proxy_in_order = false;
  std::string proxy_order_dir;         // recorded orders, replayed
  std::string proxy_order_record_dir;  // this run's orders, recorded
};

// One Adam run over some of (a, g) for a number of epochs.
struct Stage {
  bool learn_a = false;
  bool learn_g = false;
  int epochs = 0;
  bool swa_schedule = false;  // SwaLambdaLr and the running average of a; else StepLr
};

class FedLaw : public fl::Aggregator {
 public:
  explicit FedLaw(FedLawConfig config) : config_(config) {
    if (config_.holdout_fraction > 0) {
      fedkit::aggregators::HoldoutOptions holdout;
      holdout.set_fraction(config_.holdout_fraction);
      fl::HookRequest request;
      request.name = "holdout";
      request.options.PackFrom(holdout);
      hooks_.push_back(std::move(request));
    }
  }

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    properties.order_invariant = true;          // updates are sorted by client id
    properties.single_client_identity = false;  // gamma still moves, buffers are the server's
    properties.uses_proxy = true;
    for (const fl::HookRequest& hook : hooks_) properties.client_hooks.push_back(hook.name);
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_RETURN_IF_ERROR(RequireProxy(context, "fedlaw"));
    global_ = global;  // shares storage: only read, for layouts
    updates_.clear();
    fl::RoundPlan plan;
    plan.hooks = hooks_;
    return plan;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    if (!global_.has_value()) {
      return absl::FailedPreconditionError("Accumulate called before Configure");
    }
    if (absl::Status s = global_->CheckSameLayout(update.delta); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("delta: ", s.message()));
    }
    if (update.num_examples < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_examples is ", update.num_examples, ": no size weight"));
    }
    if (updates_.count(update.client_id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a second update from client ", update.client_id, " this round"));
    }
    try {
      updates_[update.client_id] = {update.num_examples,
                                    fedlaw::FlattenParameters(update.delta).to(context.device)};
    } catch (const c10::Error& e) {
      return absl::InternalError(e.what_without_backtrace());
    }
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_RETURN_IF_ERROR(RequireProxy(context, "fedlaw"));
    if (updates_.empty()) return absl::FailedPreconditionError("no update accumulated this round");
    absl::StatusOr<fl::ModelState> next;
    try {
      next = FinalizeUnguarded(global, context);
    } catch (const c10::Error& e) {
      next = absl::InternalError(e.what_without_backtrace());
    }
    updates_.clear();
    global_.reset();
    return next;
  }

 private:
  absl::StatusOr<fl::ModelState> FinalizeUnguarded(const fl::ModelState& global,
                                                   fl::ServerContext& context) {
    if (model_ == nullptr) {
      FL_ASSIGN_OR_RETURN(model_, context.new_model());
    }
    // The round starts from the global's parameters and buffers (the server's own
    // statistics: see the file comment).
    FL_RETURN_IF_ERROR(global.LoadInto(*model_));
    const std::vector<at::Tensor> parameters = model_->parameters();

    // std::map iterates by client id: the cohort's order is fixed.
    Cohort cohort;
    cohort.base = fedlaw::FlattenParameters(global).to(context.device);
    std::vector<at::Tensor> rows;
    std::vector<double> size_weights;
    double total = 0.0;
    for (const auto& [id, stored] : updates_) {
      rows.push_back(stored.delta);
      size_weights.push_back(static_cast<double>(stored.num_examples));
      total += static_cast<double>(stored.num_examples);
    }
    for (double& w : size_weights) w /= total;
    cohort.deltas = at::stack(rows);
    rows.clear();

    const Weights start = fedlaw::InitialWeights(config_.parameterization, size_weights,
                                                 /*lambda_from_sizes=*/!config_.learn_lambda);
    const fl::Examples& proxy = *context.proxy;
    fedlaw::LoadParameters(fedlaw::Combine(cohort, start.Gamma(), start.Lambda()), parameters);
    const double loss_before = ProxyLoss(*model_, proxy);

    Weights weights = start;
    std::mt19937_64 rng(context.round_seed);
    FL_ASSIGN_OR_RETURN(const std::vector<std::vector<int64_t>> recorded,
                        RecordedProxyOrders(context.round, proxy.size()));
    auto next_recorded = recorded.begin();
    for (const Stage& stage : Stages()) {
      FL_RETURN_IF_ERROR(RunStage(stage, cohort, proxy, parameters, context.round, rng,
                                  recorded.empty() ? nullptr : &next_recorded, weights));
    }

    const double gamma = weights.Gamma();
    const std::vector<double> lambda = weights.Lambda();
    fedlaw::LoadParameters(fedlaw::Combine(cohort, gamma, lambda), parameters);
    const double loss_after = ProxyLoss(*model_, proxy);

    double entropy = 0.0;
    for (double l : lambda) {
      if (l > 0) entropy -= l * std::log(l);
    }
    context.diagnostics["gamma"] = gamma;
    context.diagnostics["lambda_entropy"] = entropy;
    context.diagnostics["lambda_max"] = *std::max_element(lambda.begin(), lambda.end());
    context.diagnostics["proxy_loss_before"] = loss_before;
    context.diagnostics["proxy_loss_after"] = loss_after;

    fl::ModelState next = fl::ModelState::FromModule(*model_);
    FL_RETURN_IF_ERROR(global.CheckSameLayout(next));
    return next;
  }

  // The round's recorded proxy orders (proxy_order_dir), one per server epoch;
  // none without the option.
  absl::StatusOr<std::vector<std::vector<int64_t>>> RecordedProxyOrders(int round,
                                                                       int64_t proxy_size) const {
    if (config_.proxy_order_dir.empty()) return std::vector<std::vector<int64_t>>();
    std::vector<int64_t> positions(proxy_size);
    std::iota(positions.begin(), positions.end(), 0);
    FL_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> orders,
                        fl::ReadBatchOrders(config_.proxy_order_dir, round, "proxy", positions));
    int64_t epochs = 0;
    for (const Stage& stage : Stages()) epochs += stage.epochs;
    if (static_cast<int64_t>(orders.size()) < epochs) {
      return absl::InvalidArgumentError(absl::StrCat("options.proxy_order_dir: round ", round, ": ",
                                                     orders.size(), " recorded epochs, ", epochs,
                                                     " needed"));
    }
    return orders;
  }

  std::vector<Stage> Stages() const {
    if (!config_.learn_gamma && !config_.learn_lambda) return {};
    if (!config_.swa) {
      return {{config_.learn_lambda, config_.learn_gamma, config_.server_epochs, false}};
    }
    std::vector<Stage> stages;
    const Stage lambda{true, false, config_.server_epochs / 2, true};
    const Stage gamma{false, true, config_.server_epochs / 2, false};
    if (config_.learn_gamma && config_.swa_gamma_first) stages.push_back(gamma);
    if (config_.learn_lambda) stages.push_back(lambda);
    if (config_.learn_gamma && !config_.swa_gamma_first) stages.push_back(gamma);
    return stages;
  }

  // A fresh Adam over the stage's variables (the others' gradients are zeroed, which
  // keeps them exactly where they are), one step per proxy minibatch.
  absl::Status RunStage(const Stage& stage, const Cohort& cohort, const fl::Examples& proxy,
                        const std::vector<at::Tensor>& parameters, int round, std::mt19937_64& rng,
                        std::vector<std::vector<int64_t>>::const_iterator* recorded,
                        Weights& weights) {
    const size_t n = weights.a.size();
    fedlaw::ScalarAdam adam(n + 1, config_.beta1, config_.beta2, config_.eps);
    const std::vector<double> a_at_start = weights.a;
    std::vector<double> a_average;
    int snapshots = 0;
    std::vector<double> x(weights.a);
    x.push_back(weights.g);
    model_->train();
    for (int epoch = 0; epoch < stage.epochs; ++epoch) {
      const double lr = stage.swa_schedule ? fedlaw::SwaLambdaLr(config_.lr, epoch)
                                           : fedlaw::StepLr(config_.lr, epoch);
      const std::vector<int64_t> order =
          recorded != nullptr ? *(*recorded)++
                              : EpochOrder(proxy.size(), config_.proxy_in_order ? nullptr : &rng);
      if (!config_.proxy_order_record_dir.empty()) {
        absl::Status written =
            fl::AppendBatchOrder(config_.proxy_order_record_dir, round, "proxy", order);
        if (!written.ok()) {
          return absl::Status(written.code(), absl::StrCat("options.proxy_order_record_dir: ",
                                                           written.message()));
        }
      }
      for (const at::Tensor& batch : OrderedBatches(order, config_.batch_size, proxy.y.device())) {
        at::Tensor gradient;
        fedlaw::LossAndGradient(*model_, parameters,
                                fedlaw::Combine(cohort, weights.Gamma(), weights.Lambda()),
                                proxy.x.index_select(0, batch), proxy.y.index_select(0, batch),
                                &gradient);
        const fedlaw::Gradient grad = fedlaw::ChainRule(weights, cohort, gradient);
        std::vector<double> g(n + 1, 0.0);
        if (stage.learn_a) std::copy(grad.a.begin(), grad.a.end(), g.begin());
        if (stage.learn_g) g[n] = grad.g;
        adam.Step(x, g, lr);
        std::copy(x.begin(), x.begin() + n, weights.a.begin());
        weights.g = x[n];
      }
      if (stage.swa_schedule && epoch > fedlaw::kSwaStart) {
        ++snapshots;
        if (snapshots == 1) a_average = weights.a;
        for (size_t i = 0; i < n; ++i) a_average[i] += (weights.a[i] - a_average[i]) / snapshots;
      }
    }
    // The SWA stage's lambda is the averaged a, or its start when no snapshot was taken.
    if (stage.swa_schedule) weights.a = snapshots > 0 ? a_average : a_at_start;
    return absl::OkStatus();
  }

  struct StoredUpdate {
    int64_t num_examples = 0;
    at::Tensor delta;  // flat parameters, [P]
  };

  const FedLawConfig config_;
  std::vector<fl::HookRequest> hooks_;
  std::optional<fl::ModelState> global_;
  std::map<int64_t, StoredUpdate> updates_;
  // The server model, built once; it holds nothing across rounds that the global
  // model does not.
  std::unique_ptr<fl::Model> model_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedLaw(const FedLawOptions& options,
                                                             const fl::Aggregator::CreateArgs&) {
  FedLawConfig config;
  fl::ErrorList errors;
  if (!FedLawOptions::Parameterization_IsValid(options.parameterization())) {
    errors.Add("options.parameterization",
               absl::StrCat("must be EXP or QUAD, got ", options.parameterization()));
  }
  config.parameterization = options.parameterization() == FedLawOptions::QUAD
                                ? Parameterization::kQuad
                                : Parameterization::kExp;
  if (!FedLawOptions::Learn_IsValid(options.learn())) {
    errors.Add("options.learn", absl::StrCat("must be BOTH, GAMMA_ONLY, LAMBDA_ONLY or NONE, got ",
                                             options.learn()));
  }
  config.learn_gamma = options.learn() == FedLawOptions::BOTH ||
                       options.learn() == FedLawOptions::GAMMA_ONLY;
  config.learn_lambda = options.learn() == FedLawOptions::BOTH ||
                        options.learn() == FedLawOptions::LAMBDA_ONLY;
  if (options.has_server_epochs()) config.server_epochs = options.server_epochs();
  if (config.server_epochs < 1) {
    errors.Add("options.server_epochs", absl::StrCat("must be >= 1, got ", config.server_epochs));
  }
  if (options.has_lr()) config.lr = options.lr();
  if (!(config.lr > 0) || !std::isfinite(config.lr)) {
    errors.Add("options.lr", absl::StrCat("must be > 0, got ", config.lr));
  }
  if (options.has_beta1()) config.beta1 = options.beta1();
  if (!(config.beta1 >= 0 && config.beta1 < 1)) {
    errors.Add("options.beta1", absl::StrCat("must be in [0, 1), got ", config.beta1));
  }
  if (options.has_beta2()) config.beta2 = options.beta2();
  if (!(config.beta2 >= 0 && config.beta2 < 1)) {
    errors.Add("options.beta2", absl::StrCat("must be in [0, 1), got ", config.beta2));
  }
  if (options.has_eps()) config.eps = options.eps();
  if (!(config.eps > 0) || !std::isfinite(config.eps)) {
    errors.Add("options.eps", absl::StrCat("must be > 0, got ", config.eps));
  }
  if (options.has_batch_size()) config.batch_size = options.batch_size();
  if (config.batch_size < 1) {
    errors.Add("options.batch_size", absl::StrCat("must be >= 1, got ", config.batch_size));
  }
  config.swa = options.swa();
  if (!FedLawOptions::SwaOrder_IsValid(options.swa_order())) {
    errors.Add("options.swa_order",
               absl::StrCat("must be LAMBDA_FIRST or GAMMA_FIRST, got ", options.swa_order()));
  }
  config.swa_gamma_first = options.swa_order() == FedLawOptions::GAMMA_FIRST;
  if (options.has_client_holdout_fraction()) {
    config.holdout_fraction = options.client_holdout_fraction();
  }
  if (!(config.holdout_fraction >= 0 && config.holdout_fraction < 1)) {
    errors.Add("options.client_holdout_fraction",
               absl::StrCat("must be in [0, 1), got ", config.holdout_fraction));
  }
  config.proxy_in_order = options.proxy_in_order();
  config.proxy_order_dir = options.proxy_order_dir();
  if (!config.proxy_order_dir.empty() && config.proxy_in_order) {
    errors.Add("options.proxy_order_dir", "cannot be combined with proxy_in_order");
  }
  config.proxy_order_record_dir = options.proxy_order_record_dir();
  if (absl::Status record = fl::CheckBatchOrderRecordFolder(config.proxy_order_record_dir);
      !record.ok()) {
    errors.Add("options.proxy_order_record_dir", record.message());
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<FedLaw>(config);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedlaw", FedLawOptions, CreateFedLaw);
FL_CONFORMANCE_REASON("fedlaw", kNoPartialSums,
                      "it learns a weight per client on the proxy set, over every client's "
                      "update");

}  // namespace
}  // namespace aggregators
