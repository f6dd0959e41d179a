// DP-FedAvg: client-level differential privacy for any aggregator whose step is a
// function of sums (McMahan, Ramage, Talwar & Zhang, "Learning Differentially
// Private Recurrent Language Models", ICLR 2018; adaptive clipping from Andrew,
// Thakkar, McMahan & Ramaswamy, "Differentially Private Learning with Adaptive
// Clipping", NeurIPS 2021). Every round:
//
//  1. Each client clips its update (as sent, after any upload codec) to L2 norm C
//     over parameters (the "dp_clip" hook, planned here): delta * min(1, C / ||delta||).
//     With adaptive clipping it also reports b = 1[||delta|| <= C].
//  2. The server clips again (a no-op for a client that clipped; it keeps the
//     sensitivity whatever a client sent), gives every update weight 1, and hands
//     it to the `base`, which accumulates its sums.
//  3. Before the base finalises, each of its sums declared as a sum of deltas gets
//     Gaussian noise of standard deviation z_d C, each sum of squared norms (FedExP)
//     z_d C^2, and every weight total and count is replaced by the expected cohort
//     size m (server.clients_per_round): the realised cohort never divides a sum,
//     so the sensitivity is what the accountant assumes. The base's step follows
//     (FedAvg: w + eta (sum + noise) / m; FedAvgM/FedAdam: their server optimiser on
//     that mean; FedExP: its extrapolation from the noised sums).
//  4. Adaptive clipping: C <- C exp(-eta_C (b_bar - gamma)), b_bar = (sum_k (b_k - 1/2)
//     + N(0, sigma_b^2)) / m + 1/2.
//
// The privacy: the noise multiplier z (noise_multiplier, or the smallest meeting
// target_epsilon over server.rounds) is the round's total. With G noised data sums
// (1 for FedAvg, 2 for FedExP) and, when adaptive, the count (sensitivity 1/2),
// the data sums use z_d = sqrt(G / (z^-2 - (2 sigma_b)^-2)), so that the round is
// one Gaussian mechanism of multiplier z (Andrew et al., Theorem 1). An RDP
// accountant (fl/privacy; or with accountant PLD, privacy loss distributions,
// Poisson cohorts only) composes one subsampled Gaussian step per round:
//   - server.cohort_sampling POISSON: q = m / N, add/remove-one-client DP;
//   - FIXED_SIZE (the default): q = m / N without replacement, replace-one-client
//     DP, whose sensitivity is 2C: the accountant is given z / 2.
//   - cohorts that are not uniform draws (a client trace: whoever is online is
//     drawn): no amplification, a plain Gaussian per round with z / 2;
//     asynchronous mode is refused (no rate or per-step sensitivity holds).
// metrics.csv gets epsilon (at `delta`, the run so far), dp_clip_norm,
// dp_noise_multiplier, with adaptive clipping dp_within_bound (the realised
// fraction, for the reader; the method uses only the noised one), and dp_server_clipped (updates the server had
// to clip: a client or codec that did not keep to C).
//
// LOCAL mode: each client adds N(0, (z C)^2) to every parameter of its clipped
// update and the server adds nothing (sums of squared norms are refused: they would
// leave the client unnoised). epsilon is then the local guarantee of the client
// that has taken part most often: one Gaussian of sensitivity 2C per round it took
// part in, no amplification by sampling. Participations are a partial sum, so secure
// aggregation and other ranks' clients are counted.
//
// Buffers (BatchNorm's running statistics) stay at the initial model's values: their
// average over clients would be neither clipped nor noised. Not covered: a round
// whose Poisson cohort is empty keeps the model without a noised step (the server
// skips aggregation then).
//
//   aggregator {
//     name: "dp_fedavg"
//     options {
//       [type.googleapis.com/fedkit.aggregators.DpFedAvgOptions] {
//         target_epsilon: 4 clip_norm: 1.0
//         base { name: "fedadam" }
//       }
//     }
//   }

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "aggregators/common/base_aggregator.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/dp_fedavg/dp_fedavg_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/errors.h"
#include "fl/privacy/gaussian_noise.h"
#include "fl/privacy/noise_search.h"
#include "fl/privacy/pld_accountant.h"
#include "fl/privacy/rdp_accountant.h"
#include "fl/registry.h"
#include "fl/seeding.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::DpClipHookOptions;
using ::fedkit::aggregators::DpFedAvgOptions;
using ::fl::privacy::Sampling;

constexpr char kName[] = "dp_fedavg";
constexpr char kHookName[] = "dp_clip";
constexpr char kWithinBound[] = "dp_clip/within_bound";
// The wrapper's own partial sums and state, beside the base's.
constexpr char kWithinSum[] = "within_bound";
constexpr char kAcceptedSum[] = "accepted";
constexpr char kServerClippedSum[] = "server_clipped";
// LOCAL: who took part this round, one count per client of the federation. A
// partial sum, so that secure aggregation and other ranks' clients are counted.
constexpr char kParticipationSum[] = "participations";
constexpr char kClipNormState[] = "dp_fedavg/clip_norm";
constexpr char kRdpState[] = "dp_fedavg/rdp";
constexpr char kParticipationState[] = "dp_fedavg/participations";
// Under PLD, the steps composed so far: q and z are fixed for a run, so the PLD is
// rebuilt from the count on restore rather than stored grid point by grid point.
constexpr char kPldStepsState[] = "dp_fedavg/pld_steps";
constexpr uint64_t kNoiseStream = 0x44502d4e6f697365;  // "DP-Noise"


absl::StatusOr<fl::privacy::GaussianNoise> NoiseSource(bool reproducible, uint64_t seed) {
  if (reproducible) return fl::privacy::GaussianNoise::Reproducible(seed);
  return fl::privacy::GaussianNoise::Secure();
}

class DpClipHook : public fl::ClientHook {
 public:
  explicit DpClipHook(DpClipHookOptions options) : options_(std::move(options)) {}

  bool planned_only() const override { return true; }

  absl::Status AfterTraining(fl::HookContext& context, fl::ClientUpdate& update) override {
    if (!(options_.clip_norm() > 0) || !std::isfinite(options_.clip_norm())) {
      return absl::InvalidArgumentError(
          absl::StrCat("clip_norm must be > 0, got ", options_.clip_norm()));
    }
    const bool within = !update.delta.ClipParameterNorm(options_.clip_norm());
    if (options_.report_within_bound()) {
      update.extras[kWithinBound] = fl::ModelState(
          {{"within", at::scalar_tensor(within ? 1.0 : 0.0, at::kDouble), false}});
    }
    if (options_.local_noise_stddev() > 0) {
      FL_ASSIGN_OR_RETURN(fl::privacy::GaussianNoise noise,
                          NoiseSource(options_.reproducible_noise(), context.seed));
      at::NoGradGuard no_grad;
      for (fl::ModelState::Entry& e : update.delta.mutable_entries()) {
        if (!e.is_buffer) e.tensor.add_(noise.Like(e.tensor, options_.local_noise_stddev()));
      }
    }
    return absl::OkStatus();
  }

 private:
  const DpClipHookOptions options_;
};

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateDpClipHook(
    const DpClipHookOptions& options, const fl::ClientHook::CreateArgs&) {
  return std::make_unique<DpClipHook>(options);
}

FL_REGISTER_PLUGIN(fl::ClientHook, kHookName, DpClipHookOptions, CreateDpClipHook);

struct AdaptiveClipping {
  double target_quantile = 0.5;
  double learning_rate = 0.2;
  std::optional<double> count_noise_stddev;  // default m / 20
  std::optional<double> max_clip_norm;       // default: no ceiling
};

struct DpConfig {
  std::optional<double> noise_multiplier;  // else target_epsilon
  double target_epsilon = 0.0;
  std::optional<double> delta;             // default N^-1.1
  double initial_clip_norm = 0.1;
  std::optional<AdaptiveClipping> adaptive;
  bool local = false;
  bool pld = false;  // else RDP
  bool reproducible_noise = false;
};

// What the run's sampling and options fix, worked out in the first round.
struct Calibration {
  double delta = 0.0;
  double sampling_rate = 0.0;
  Sampling sampling = Sampling::kFixedSize;
  // Central mode composes one subsampled Gaussian per round at this rate and
  // sampling: the cohorts' own, or rate 1 (no amplification by sampling) when
  // the cohorts are not uniform draws.
  bool amplified = true;
  double accounted_rate = 0.0;
  Sampling accounted_sampling = Sampling::kFixedSize;
  double expected_cohort = 1.0;
  double noise_multiplier = 0.0;  // z, the round's total
  double data_multiplier = 0.0;   // z_d, each data sum's
  double count_stddev = 0.0;      // sigma_b
  // The multiplier the accountant sees per round (z, or z / 2 for replace-one).
  double accounted_multiplier = 0.0;
};

class DpFedAvg : public fl::Aggregator {
 public:
  DpFedAvg(std::unique_ptr<fl::Aggregator> base, DpConfig config)
      : base_(std::move(base)),
        dp_sums_(base_->properties().dp_sums),
        config_(std::move(config)),
        clip_norm_(config_.initial_clip_norm) {
    for (const fl::DpSum& sum : dp_sums_) {
      if (sum.role == fl::DpSum::Role::kUpdateSum || sum.role == fl::DpSum::Role::kSquaredNormSum) {
        ++noised_groups_;
      }
    }
  }

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties = base_->properties();
    properties.single_client_identity = false;  // clipped and noised
    properties.dp_sums.clear();                 // already private: not to be wrapped again
    properties.client_hooks.insert(properties.client_hooks.begin(), kHookName);
    properties.noise_from_seed = config_.reproducible_noise;
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    if (!calibration_.has_value()) {
      for (const fl::ModelState::Entry& e : global.entries()) {
        if (e.is_buffer) {
          LOG(WARNING) << "dp_fedavg: the model's buffers (\"" << e.name
                       << "\", ...) stay at their initial values: their average over clients "
                          "would be neither clipped nor noised";
          break;
        }
      }
      FL_ASSIGN_OR_RETURN(calibration_, Calibrate(context));
    }
    if (config_.local && !participations_.defined()) {
      participations_ = at::zeros({context.num_clients}, at::kLong);
    }
    if (config_.local && participations_.numel() != context.num_clients) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dp_fedavg: the restored \"", kParticipationState, "\" counts ",
          participations_.numel(), " clients, the federation has ", context.num_clients));
    }
    within_ = 0.0;
    accepted_ = 0;
    server_clipped_ = 0;
    if (config_.local) round_participations_ = at::zeros({context.num_clients}, at::kLong);
    FL_ASSIGN_OR_RETURN(fl::RoundPlan plan, base_->Configure(global, context));
    DpClipHookOptions hook;
    hook.set_clip_norm(clip_norm_);
    hook.set_report_within_bound(config_.adaptive.has_value());
    if (config_.local) hook.set_local_noise_stddev(calibration_->noise_multiplier * clip_norm_);
    hook.set_reproducible_noise(config_.reproducible_noise);
    fl::HookRequest request;
    request.name = kHookName;
    request.options.PackFrom(hook);
    plan.hooks.insert(plan.hooks.begin(), std::move(request));
    return plan;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    double within = 0.0;
    if (config_.adaptive.has_value()) {
      auto it = update.extras.find(kWithinBound);
      if (it == update.extras.end() || it->second.size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "client ", update.client_id, "'s update lacks \"", kWithinBound,
            "\": the dp_clip hook did not run on it"));
      }
      within = it->second.tensor(0).item<double>() > 0.5 ? 1.0 : 0.0;
      update.extras.erase(it);
    }
    // A client that clipped arrives at C up to float rounding: scaled all the same,
    // but counted only beyond the rounding.
    const bool clipped =
        !config_.local && std::sqrt(update.delta.SquaredNorm()) > clip_norm_ * (1 + 1e-5);
    if (!config_.local) update.delta.ClipParameterNorm(clip_norm_);
    const int64_t client = update.client_id;
    update.num_examples = 1;  // uniform weights: one client, one unit of sensitivity
    FL_RETURN_IF_ERROR(base_->Accumulate(std::move(update), context));
    within_ += within;
    ++accepted_;
    server_clipped_ += clipped ? 1 : 0;
    if (config_.local) {
      if (client < 0 || client >= round_participations_.numel()) {
        return absl::InvalidArgumentError(absl::StrCat("dp_fedavg: client id ", client,
                                                       " is outside the federation of ",
                                                       round_participations_.numel()));
      }
      round_participations_[client] += 1;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    const Calibration& c = *calibration_;
    FL_ASSIGN_OR_RETURN(
        fl::privacy::GaussianNoise noise,
        NoiseSource(config_.reproducible_noise,
                    fl::DeriveSeed(context.round_seed, fl::SeedStream::kServerRound, {kNoiseStream})));
    std::optional<NamedSums> sums = base_->PartialSums();
    if (!sums.has_value()) {
      return absl::InternalError("dp_fedavg: the base declared DP sums but has no partial sums");
    }
    NamedSums released;
    for (const auto& [name, sum] : *sums) {
      FL_ASSIGN_OR_RETURN(released[name], Release(name, sum, c, noise));
    }
    FL_RETURN_IF_ERROR(base_->MergePartialSums(std::move(released)));
    FL_ASSIGN_OR_RETURN(fl::ModelState next, base_->Finalize(global, context));
    FreezeBuffers(global, next);

    context.diagnostics["dp_clip_norm"] = clip_norm_;
    context.diagnostics["dp_noise_multiplier"] = c.noise_multiplier;
    context.diagnostics["dp_server_clipped"] = server_clipped_;
    if (config_.adaptive.has_value()) {
      context.diagnostics["dp_within_bound"] = accepted_ > 0 ? within_ / accepted_ : 0.0;
      UpdateClipNorm(c, noise);
    }
    if (config_.local) participations_ += round_participations_;
    FL_ASSIGN_OR_RETURN(const double epsilon, SpendRound(c));
    context.diagnostics["epsilon"] = epsilon;
    context.summary["privacy"] = PrivacySummary(c, epsilon, context.round);
    return next;
  }

  std::optional<NamedSums> PartialSums() const override {
    std::optional<NamedSums> base = base_->PartialSums();
    if (!base.has_value()) return std::nullopt;
    NamedSums sums;
    AddPrefixed(kBaseSums, *base, sums);
    sums[kWithinSum] = ScalarSum(within_);
    sums[kAcceptedSum] = CountSum(accepted_);
    sums[kServerClippedSum] = CountSum(server_clipped_);
    if (config_.local) sums[kParticipationSum] = round_participations_.clone();
    return sums;
  }

  absl::Status MergePartialSums(NamedSums sums) override {
    FL_RETURN_IF_ERROR(CheckMergeable(*this, /*configured=*/true, sums));
    FL_RETURN_IF_ERROR(base_->MergePartialSums(WithoutPrefix(kBaseSums, sums)));
    within_ = sums.at(kWithinSum).item<double>();
    accepted_ = static_cast<int>(sums.at(kAcceptedSum).item<int64_t>());
    server_clipped_ = static_cast<int>(sums.at(kServerClippedSum).item<int64_t>());
    if (config_.local) round_participations_ = sums.at(kParticipationSum).to(at::kLong).clone();
    return absl::OkStatus();
  }

  std::map<std::string, at::Tensor> SaveState() const override {
    std::map<std::string, at::Tensor> state = base_->SaveState();
    state[kClipNormState] = at::scalar_tensor(clip_norm_, at::kDouble);
    state[kRdpState] = at::tensor(rdp_.has_value() ? rdp_->rdp() : std::vector<double>(),
                                  at::kDouble);
    if (participations_.defined()) state[kParticipationState] = participations_.clone();
    state[kPldStepsState] = at::scalar_tensor(pld_steps_, at::kLong);
    return state;
  }

  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state) override {
    std::map<std::string, at::Tensor> base_state = state;
    auto clip = base_state.find(kClipNormState);
    auto rdp = base_state.find(kRdpState);
    if (clip == base_state.end() || rdp == base_state.end()) {
      return absl::InvalidArgumentError(absl::StrCat("dp_fedavg: the state lacks \"",
                                                     kClipNormState, "\" or \"", kRdpState, "\""));
    }
    if (clip->second.numel() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("dp_fedavg: \"", kClipNormState,
                                                     "\" must hold one value, holds ",
                                                     clip->second.numel()));
    }
    const double clip_norm = clip->second.item<double>();
    if (!(clip_norm > 0) || !std::isfinite(clip_norm)) {
      return absl::InvalidArgumentError(
          absl::StrCat("dp_fedavg: \"", kClipNormState, "\" must be > 0, got ", clip_norm));
    }
    std::vector<double> spent;
    if (rdp->second.numel() > 0) {
      const at::Tensor values = rdp->second.to(at::kCPU, at::kDouble).contiguous();
      spent.assign(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
    }
    FL_ASSIGN_OR_RETURN(std::optional<fl::privacy::RdpAccountant> restored, RestoredAccountant(spent));
    auto participations = base_state.find(kParticipationState);
    at::Tensor counts;
    if (participations != base_state.end()) {
      counts = participations->second.to(at::kCPU, at::kLong).clone();
      base_state.erase(participations);
    }
    int64_t pld_steps = 0;
    // Checkpoints written before the PLD accountant have no count: nothing under PLD.
    if (auto steps = base_state.find(kPldStepsState); steps != base_state.end()) {
      if (steps->second.numel() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("dp_fedavg: \"", kPldStepsState,
                                                       "\" must hold one value, holds ",
                                                       steps->second.numel()));
      }
      pld_steps = steps->second.item<int64_t>();
      base_state.erase(steps);
      if (pld_steps < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("dp_fedavg: \"", kPldStepsState, "\" must be >= 0, got ", pld_steps));
      }
    }
    base_state.erase(kClipNormState);
    base_state.erase(kRdpState);
    FL_RETURN_IF_ERROR(base_->RestoreState(base_state));
    clip_norm_ = clip_norm;
    rdp_ = std::move(restored);
    participations_ = counts;
    pld_steps_ = pld_steps;
    pld_.reset();  // rebuilt from the count at the next round
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<Calibration> Calibrate(const fl::ServerContext& context) const {
    Calibration c;
    const int n = context.num_clients;
    if (n < 1 || context.expected_cohort_size < 1) {
      return absl::FailedPreconditionError(absl::StrCat(
          "dp_fedavg: needs the federation's size and the expected cohort size, got ", n,
          " clients and ", context.expected_cohort_size, " per round"));
    }
    c.expected_cohort = context.expected_cohort_size;
    c.sampling_rate = std::min(1.0, c.expected_cohort / n);
    c.sampling = context.poisson_sampling ? Sampling::kPoisson : Sampling::kFixedSize;
    if (!config_.local && context.asynchronous) {
      return absl::FailedPreconditionError(
          "dp_fedavg: server.async: asynchronous mode has no uniformly drawn cohorts (a fast "
          "client reports far more often than a slow one, and may land in one step twice), "
          "which central mode's accounting assumes; use options.mode LOCAL, whose epsilon "
          "counts each client's own participations");
    }
    // A client trace's online windows make some clients far likelier to be drawn:
    // no amplification by sampling, and replace-one (the drawn set among those
    // online is of fixed size).
    c.amplified = config_.local || context.uniform_cohorts;
    c.accounted_rate = c.amplified ? c.sampling_rate : 1.0;
    c.accounted_sampling = c.amplified ? c.sampling : Sampling::kPoisson;
    if (config_.pld && !config_.local && c.amplified && c.sampling != Sampling::kPoisson) {
      return absl::FailedPreconditionError(
          "dp_fedavg: options.accountant: PLD covers Poisson cohorts (add/remove-one); set "
          "server.cohort_sampling: POISSON, or account fixed-size cohorts with RDP");
    }
    c.delta = config_.delta.value_or(std::pow(static_cast<double>(n), -1.1));
    // The local guarantee is per participation, without amplification by sampling.
    const double accounted_rate = config_.local ? 1.0 : c.accounted_rate;
    const double sensitivity_factor =
        (config_.local || c.sampling == Sampling::kFixedSize || !c.amplified) ? 2.0 : 1.0;
    if (config_.noise_multiplier.has_value()) {
      c.noise_multiplier = *config_.noise_multiplier;
    } else {
      const int64_t steps = std::max(1, context.planned_rounds);
      // Solved for the accounted multiplier z / sensitivity_factor.
      auto found =
          config_.pld
              ? fl::privacy::SmallestNoiseMultiplierPld(config_.target_epsilon, accounted_rate,
                                                        steps, c.delta)
              : fl::privacy::SmallestNoiseMultiplier(config_.target_epsilon, accounted_rate,
                                                     steps, c.delta, c.accounted_sampling);
      if (!found.ok()) {
        return absl::Status(found.status().code(),
                            absl::StrCat("dp_fedavg: options.target_epsilon: ",
                                         found.status().message()));
      }
      c.noise_multiplier = found->noise_multiplier * sensitivity_factor;
    }
    c.accounted_multiplier = c.noise_multiplier / sensitivity_factor;
    c.data_multiplier = c.noise_multiplier;
    if (config_.adaptive.has_value() && c.noise_multiplier > 0) {
      c.count_stddev = config_.adaptive->count_noise_stddev.value_or(
          std::max(c.expected_cohort / 20.0, c.noise_multiplier));
      const double left = std::pow(c.noise_multiplier, -2.0) - std::pow(2.0 * c.count_stddev, -2.0);
      if (!(left > 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dp_fedavg: options.adaptive.count_noise_stddev: the count's noise (", c.count_stddev,
            ") must exceed half the noise multiplier (", c.noise_multiplier,
            ") for the round's total to be z; raise it or lower the noise"));
      }
      c.data_multiplier = std::sqrt(noised_groups_ / left);
    } else if (c.noise_multiplier > 0) {
      c.data_multiplier = c.noise_multiplier * std::sqrt(static_cast<double>(noised_groups_));
    }
    return c;
  }

  // One of the base's sums as released: noised, replaced, or (LOCAL) as summed.
  absl::StatusOr<at::Tensor> Release(const std::string& name, const at::Tensor& sum,
                                     const Calibration& c,
                                     fl::privacy::GaussianNoise& noise) const {
    const fl::DpSum* declared = nullptr;
    for (const fl::DpSum& d : dp_sums_) {
      if (absl::StartsWith(name, d.prefix)) {
        if (declared != nullptr) {
          return absl::InternalError(absl::StrCat("dp_fedavg: the base's sum \"", name,
                                                  "\" matches two declared DP sums"));
        }
        declared = &d;
      }
    }
    if (declared == nullptr) {
      return absl::InternalError(
          absl::StrCat("dp_fedavg: the base's sum \"", name, "\" is not among its declared DP sums"));
    }
    switch (declared->role) {
      case fl::DpSum::Role::kWeightTotal:
        return at::full_like(sum, c.expected_cohort);
      case fl::DpSum::Role::kCount:
        return at::full_like(sum, std::max<int64_t>(1, std::llround(c.expected_cohort)));
      case fl::DpSum::Role::kUpdateSum:
      case fl::DpSum::Role::kSquaredNormSum: {
        // Integer sums are buffers' (counters), frozen anyway (FreezeBuffers).
        if (config_.local || c.data_multiplier == 0 || !at::isFloatingType(sum.scalar_type())) {
          return sum.clone();
        }
        const double sensitivity =
            declared->role == fl::DpSum::Role::kUpdateSum ? clip_norm_ : clip_norm_ * clip_norm_;
        return sum + noise.Like(sum, c.data_multiplier * sensitivity);
      }
    }
    return absl::InternalError("dp_fedavg: unknown DP sum role");
  }

  // Buffers keep the global model's values (see the file comment).
  static void FreezeBuffers(const fl::ModelState& global, fl::ModelState& next) {
    for (size_t i = 0; i < next.size(); ++i) {
      if (next.entries()[i].is_buffer) next.mutable_entries()[i].tensor = global.tensor(i).clone();
    }
  }

  void UpdateClipNorm(const Calibration& c, fl::privacy::GaussianNoise& noise) {
    const double count_noise = c.count_stddev > 0 ? noise.Scalar(c.count_stddev) : 0.0;
    const double within = (within_ - 0.5 * accepted_ + count_noise) / c.expected_cohort + 0.5;
    clip_norm_ *= std::exp(-config_.adaptive->learning_rate * (within - config_.adaptive->target_quantile));
    if (config_.adaptive->max_clip_norm.has_value()) {
      clip_norm_ = std::min(clip_norm_, *config_.adaptive->max_clip_norm);
    }
  }

  // Composes this round and returns epsilon so far.
  absl::StatusOr<double> SpendRound(const Calibration& c) {
    if (config_.pld) return SpendRoundPld(c);
    if (!rdp_.has_value()) rdp_.emplace();
    if (config_.local) {
      fl::privacy::RdpAccountant local;
      FL_RETURN_IF_ERROR(
          local.Compose(1.0, c.accounted_multiplier, MostParticipations(), Sampling::kPoisson));
      *rdp_ = local;
    } else {
      FL_RETURN_IF_ERROR(
          rdp_->Compose(c.accounted_rate, c.accounted_multiplier, 1, c.accounted_sampling));
    }
    FL_ASSIGN_OR_RETURN(fl::privacy::EpsilonAndOrder spent, rdp_->Epsilon(c.delta));
    return spent.epsilon;
  }

  // LOCAL mode's guarantee is that of the most frequent participant: one Gaussian
  // per round it took part in.
  int64_t MostParticipations() const {
    return participations_.numel() > 0 ? participations_.max().item<int64_t>() : 0;
  }

  absl::StatusOr<double> SpendRoundPld(const Calibration& c) {
    if (config_.local) {
      fl::privacy::PldAccountant local;
      FL_RETURN_IF_ERROR(
          local.Compose(1.0, c.accounted_multiplier, MostParticipations(), Sampling::kPoisson));
      return local.Epsilon(c.delta);
    }
    if (!pld_.has_value()) {  // first round, or the first after a restore
      pld_.emplace();
      FL_RETURN_IF_ERROR(
          pld_->Compose(c.accounted_rate, c.accounted_multiplier, pld_steps_, Sampling::kPoisson));
    }
    FL_RETURN_IF_ERROR(pld_->Compose(c.accounted_rate, c.accounted_multiplier, 1, Sampling::kPoisson));
    ++pld_steps_;
    return pld_->Epsilon(c.delta);
  }

  // summary.json's "privacy": what was spent and under which analysis.
  std::string PrivacySummary(const Calibration& c, double epsilon, int rounds) const {
    auto number = [](double x) {
      return std::isfinite(x) ? absl::StrFormat("%.9g", x) : std::string("\"inf\"");
    };
    const std::string guarantee =
        config_.local ? "local: one client's update, per participation"
        : !c.amplified ? "replace one client's data, no amplification by sampling (cohorts "
                         "drawn among the clients online)"
        : c.sampling == Sampling::kPoisson ? "add/remove one client"
                                           : "replace one client's data (N public)";
    return absl::StrCat(
        "{\"epsilon\": ", number(epsilon), ", \"delta\": ", number(c.delta),
        ", \"noise_multiplier\": ", number(c.noise_multiplier),
        ", \"sampling_rate\": ", number(c.sampling_rate), ", \"sampling\": \"",
        fl::privacy::SamplingName(c.sampling), "\", \"amplified_by_sampling\": ",
        c.amplified && !config_.local ? "true" : "false", ", \"rounds\": ", rounds,
        ", \"mode\": \"", config_.local ? "local" : "central", "\", \"guarantee\": \"",
        guarantee, "\", \"noise\": \"",
        config_.reproducible_noise
            ? "reproducible from the spec's seed: NOT private against whoever holds the spec"
            : "secure (drawn from the operating system's randomness)",
        "\", ",
        config_.pld ? absl::StrCat("\"accountant\": \"pld\", \"grid\": ",
                                   number(fl::privacy::PldOptions().value_discretization_interval),
                                   "}")
                    : "\"accountant\": \"rdp\", \"conversion\": \"cks\"}");
  }

  // An accountant holding `spent` at the default orders (none before any round).
  static absl::StatusOr<std::optional<fl::privacy::RdpAccountant>> RestoredAccountant(
      const std::vector<double>& spent) {
    if (spent.empty()) return std::optional<fl::privacy::RdpAccountant>();
    fl::privacy::RdpAccountant accountant;
    if (spent.size() != accountant.orders().size()) {
      return absl::InvalidArgumentError(absl::StrCat("dp_fedavg: \"", kRdpState, "\" holds ",
                                                     spent.size(), " orders, expected ",
                                                     accountant.orders().size()));
    }
    FL_RETURN_IF_ERROR(accountant.RestoreRdp(spent));
    return std::optional<fl::privacy::RdpAccountant>(std::move(accountant));
  }

  std::unique_ptr<fl::Aggregator> base_;
  // The base's declared DP sums, read once: Release looks each partial sum up here.
  const std::vector<fl::DpSum> dp_sums_;
  const DpConfig config_;
  int noised_groups_ = 0;
  double clip_norm_;
  std::optional<Calibration> calibration_;
  std::optional<fl::privacy::RdpAccountant> rdp_;
  std::optional<fl::privacy::PldAccountant> pld_;
  int64_t pld_steps_ = 0;  // PLD steps composed (central mode)
  at::Tensor participations_;  // LOCAL: rounds each client took part in
  at::Tensor round_participations_;  // LOCAL: this round's, a partial sum
  // Per round.
  double within_ = 0.0;
  int accepted_ = 0;
  int server_clipped_ = 0;
};

// The registered aggregators that declare DP sums with their default options.
std::vector<std::string> DpCapableAggregators() {
  std::vector<std::string> names;
  const auto& registry = fl::Registry<fl::Aggregator>::Global();
  for (const std::string& name : registry.Names()) {
    if (name == kName) continue;
    auto created = registry.Create(name, google::protobuf::Any());
    if (created.ok() && !(*created)->properties().dp_sums.empty()) names.push_back(name);
  }
  return names;
}

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateDpFedAvg(const DpFedAvgOptions& options,
                                                               const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  DpConfig config;
  switch (options.noise_case()) {
    case DpFedAvgOptions::kTargetEpsilon:
      config.target_epsilon = options.target_epsilon();
      if (!(config.target_epsilon > 0) || !std::isfinite(config.target_epsilon)) {
        errors.Add("options.target_epsilon",
                   absl::StrCat("must be > 0 and finite, got ", config.target_epsilon));
      }
      break;
    case DpFedAvgOptions::kNoiseMultiplier:
      config.noise_multiplier = options.noise_multiplier();
      if (!(*config.noise_multiplier >= 0) || !std::isfinite(*config.noise_multiplier)) {
        errors.Add("options.noise_multiplier",
                   absl::StrCat("must be >= 0 and finite, got ", *config.noise_multiplier));
      }
      break;
    case DpFedAvgOptions::NOISE_NOT_SET:
      config.noise_multiplier = 1.0;
      break;
  }
  if (options.has_delta()) {
    config.delta = options.delta();
    if (!(*config.delta > 0 && *config.delta < 1)) {
      errors.Add("options.delta", absl::StrCat("must be in (0, 1), got ", *config.delta));
    }
  }
  config.local = options.mode() == DpFedAvgOptions::LOCAL;
  if (!DpFedAvgOptions::Accountant_IsValid(options.accountant())) {
    errors.Add("options.accountant", absl::StrCat("must be RDP or PLD, got ", options.accountant()));
  }
  config.pld = options.accountant() == DpFedAvgOptions::PLD;
  config.reproducible_noise = options.reproducible_noise();
  if (options.clipping_case() == DpFedAvgOptions::kClipNorm) {
    config.initial_clip_norm = options.clip_norm();
    if (!(config.initial_clip_norm > 0) || !std::isfinite(config.initial_clip_norm)) {
      errors.Add("options.clip_norm", absl::StrCat("must be > 0, got ", config.initial_clip_norm));
    }
  } else {
    const auto& a = options.adaptive();
    AdaptiveClipping adaptive;
    if (a.has_initial_clip_norm()) config.initial_clip_norm = a.initial_clip_norm();
    if (!(config.initial_clip_norm > 0) || !std::isfinite(config.initial_clip_norm)) {
      errors.Add("options.adaptive.initial_clip_norm",
                 absl::StrCat("must be > 0, got ", config.initial_clip_norm));
    }
    if (a.has_target_quantile()) adaptive.target_quantile = a.target_quantile();
    if (!(adaptive.target_quantile > 0 && adaptive.target_quantile < 1)) {
      errors.Add("options.adaptive.target_quantile",
                 absl::StrCat("must be in (0, 1), got ", adaptive.target_quantile));
    }
    if (a.has_learning_rate()) adaptive.learning_rate = a.learning_rate();
    if (!(adaptive.learning_rate > 0) || !std::isfinite(adaptive.learning_rate)) {
      errors.Add("options.adaptive.learning_rate",
                 absl::StrCat("must be > 0, got ", adaptive.learning_rate));
    }
    if (a.has_count_noise_stddev()) {
      adaptive.count_noise_stddev = a.count_noise_stddev();
      if (!(*adaptive.count_noise_stddev > 0) || !std::isfinite(*adaptive.count_noise_stddev)) {
        errors.Add("options.adaptive.count_noise_stddev",
                   absl::StrCat("must be > 0, got ", *adaptive.count_noise_stddev));
      }
    }
    if (a.has_max_clip_norm()) {
      adaptive.max_clip_norm = a.max_clip_norm();
      if (!(*adaptive.max_clip_norm >= config.initial_clip_norm) ||
          !std::isfinite(*adaptive.max_clip_norm)) {
        errors.Add("options.adaptive.max_clip_norm",
                   absl::StrCat("must be finite and >= initial_clip_norm (",
                                config.initial_clip_norm, "), got ", *adaptive.max_clip_norm));
      }
    }
    if (config.local) {
      errors.Add("options.mode", "LOCAL needs a fixed clip_norm: adaptive clipping's count "
                                 "would leave each client unnoised");
    }
    config.adaptive = adaptive;
  }
  std::unique_ptr<fl::Aggregator> base = CreateBaseAggregator(options.base(), kName, errors);
  if (base != nullptr) {
    const std::vector<fl::DpSum> sums = base->properties().dp_sums;
    const std::string base_name = options.base().name().empty() ? "fedavg" : options.base().name();
    if (sums.empty()) {
      errors.Add("options.base",
                 absl::StrCat("\"", base_name, "\" cannot run under differential privacy: its "
                              "aggregation is not a function of sums with a bounded sensitivity "
                              "to one client (it declares no DP sums); those that do: ",
                              absl::StrJoin(DpCapableAggregators(), ", ")));
    } else if (config.local) {
      for (const fl::DpSum& sum : sums) {
        if (sum.role == fl::DpSum::Role::kSquaredNormSum) {
          errors.Add("options.mode",
                     absl::StrCat("LOCAL cannot run \"", base_name, "\": its sum \"", sum.prefix,
                                  "\" of squared update norms would leave each client unnoised"));
        }
      }
    }
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<DpFedAvg>(std::move(base), std::move(config));
}

FL_REGISTER_PLUGIN(fl::Aggregator, kName, DpFedAvgOptions, CreateDpFedAvg);

}  // namespace
}  // namespace aggregators
