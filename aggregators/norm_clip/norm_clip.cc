// Norm clipping (Sun, Kairouz, Suresh & McMahan, "Can You Really Backdoor Federated
// Learning?", arXiv 1911.07963, 2019): before the `base` aggregator sees a client's
// update, the server bounds its L2 norm,
//
//   delta_k <- delta_k * min(1, C / ||delta_k||),
//
// the norm taken over parameters; buffers are neither counted nor scaled. The base
// then aggregates the clipped updates as it would any others: FedAvg by default
// (the paper's setting), or any registered aggregator. C is either
//   - fixed, max_norm (the paper's M): each update is clipped as it arrives and
//     passed straight to the base, so memory is the base's, and distributed runs
//     all-reduce the base's sums (if it has them) with the clipped counts; or
//   - adaptive, median_multiple times the median norm of the round's updates (the
//     mean of the two middle norms for an even count; default, with multiple 1).
//     The median needs every norm, so the round's updates, extras included, are held
//     until Finalize (K models), then clipped and passed to the base in arrival
//     order; distributed runs gather them to one process. An update the base
//     refuses then fails the round, since the server has already counted it as
//     accepted.
// Only the delta is clipped: an extra that a base's hook computed from the unclipped
// delta (FedExP's ||Delta||^2) goes on as the client sent it. The base's client
// hooks, broadcasts, evaluation model and state pass through unchanged (SaveState
// is the base's). Diagnostics: norm_clip/clipped_fraction, the share of the round's
// updates scaled down, and with the adaptive bound norm_clip/bound, the round's C.
//
//   aggregator {
//     name: "norm_clip"
//     options {
//       [type.googleapis.com/fedkit.aggregators.NormClipOptions] {
//         max_norm: 2.0            # or median_multiple: 1.0 (the default)
//         base { name: "fedavg" }
//       }
//     }
//   }

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/base_aggregator.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/norm_clip/norm_clip_options.pb.h"
#include "aggregators/common/held_updates.h"
#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::NormClipOptions;

constexpr char kName[] = "norm_clip";
// Partial-sum names of the fixed bound's counts.
constexpr char kAccepted[] = "accepted";
constexpr char kClipped[] = "clipped";


class NormClip : public fl::Aggregator {
 public:
  // A fixed bound when `max_norm` is set, else median_multiple x the round's median.
  NormClip(std::unique_ptr<fl::Aggregator> base, std::optional<double> max_norm,
           double median_multiple)
      : base_(std::move(base)), max_norm_(max_norm), median_multiple_(median_multiple) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties = base_->properties();
    // A lone client's norm is the round's median: a multiple >= 1 leaves it whole,
    // a fixed bound may not.
    properties.single_client_identity =
        properties.single_client_identity && !max_norm_.has_value() && median_multiple_ >= 1.0;
    properties.dp_sums.clear();  // dp_fedavg clips itself; its base takes the base
    properties.sums_only = properties.sums_only && max_norm_.has_value();
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    accepted_ = 0;
    clipped_ = 0;
    return base_->Configure(global, context);
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    const double norm = std::sqrt(update.delta.SquaredNorm());
    if (!max_norm_.has_value()) {
      FL_RETURN_IF_ERROR(held_.Add(std::move(update)));
      norms_.push_back(norm);
      return absl::OkStatus();
    }
    const bool clipped = update.delta.ClipParameterNorm(*max_norm_, norm);
    FL_RETURN_IF_ERROR(base_->Accumulate(std::move(update), context));
    ++accepted_;
    clipped_ += clipped ? 1 : 0;
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    const absl::Status passed_on =
        max_norm_.has_value() ? absl::OkStatus() : ClipHeldAndPassOn(global, context);
    const int accepted = std::exchange(accepted_, 0);
    const int clipped = std::exchange(clipped_, 0);
    FL_RETURN_IF_ERROR(passed_on);
    FL_ASSIGN_OR_RETURN(fl::ModelState next, base_->Finalize(global, context));
    context.diagnostics["norm_clip/clipped_fraction"] = static_cast<double>(clipped) / accepted;
    return next;
  }

  // With a fixed bound, the base's sums and the counts; none with the adaptive
  // bound, whose median needs every norm (or when the base has none).
  std::optional<NamedSums> PartialSums() const override {
    if (!max_norm_.has_value()) return std::nullopt;
    std::optional<NamedSums> base = base_->PartialSums();
    if (!base.has_value()) return std::nullopt;
    NamedSums sums;
    AddPrefixed(kBaseSums, *base, sums);
    sums[kAccepted] = CountSum(accepted_);
    sums[kClipped] = CountSum(clipped_);
    return sums;
  }

  absl::Status MergePartialSums(NamedSums sums) override {
    // Configured or not is the base's to say (its PartialSums).
    FL_RETURN_IF_ERROR(CheckMergeable(*this, /*configured=*/true, sums));
    FL_RETURN_IF_ERROR(base_->MergePartialSums(WithoutPrefix(kBaseSums, sums)));
    accepted_ = static_cast<int>(sums.at(kAccepted).item<int64_t>());
    clipped_ = static_cast<int>(sums.at(kClipped).item<int64_t>());
    return absl::OkStatus();
  }

  std::map<std::string, at::Tensor> SaveState() const override { return base_->SaveState(); }
  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state) override {
    return base_->RestoreState(state);
  }

 private:
  // The adaptive bound: clips the held updates against the round's median norm and
  // hands them to the base.
  absl::Status ClipHeldAndPassOn(const fl::ModelState& global, fl::ServerContext& context) {
    const std::vector<double> norms = std::move(norms_);
    norms_.clear();
    FL_ASSIGN_OR_RETURN(std::vector<fl::ClientUpdate> updates, held_.Take(global));
    const double bound =
        median_multiple_ *
        CoordinateMedian(at::tensor(norms, at::kDouble).unsqueeze(1)).item<double>();
    context.diagnostics["norm_clip/bound"] = bound;
    for (size_t i = 0; i < updates.size(); ++i) {
      const bool clipped = updates[i].delta.ClipParameterNorm(bound, norms[i]);
      const int64_t client = updates[i].client_id;
      if (absl::Status s = base_->Accumulate(std::move(updates[i]), context); !s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat("the base aggregator refused client ", client,
                                   "'s update, held for the round's median norm: ", s.message()));
      }
      ++accepted_;
      clipped_ += clipped ? 1 : 0;
    }
    return absl::OkStatus();
  }

  std::unique_ptr<fl::Aggregator> base_;
  const std::optional<double> max_norm_;
  const double median_multiple_;
  // Per round.
  HeldUpdates held_;           // adaptive bound only
  std::vector<double> norms_;  // the held updates' norms, in their order
  int accepted_ = 0;           // updates the base took
  int clipped_ = 0;            // of which scaled down
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateNormClip(const NormClipOptions& options,
                                                               const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  std::optional<double> max_norm;
  double median_multiple = 1.0;
  switch (options.bound_case()) {
    case NormClipOptions::kMaxNorm:
      max_norm = options.max_norm();
      if (!(*max_norm > 0) || !std::isfinite(*max_norm)) {
        errors.Add("options.max_norm", absl::StrCat("must be > 0, got ", *max_norm));
      }
      break;
    case NormClipOptions::kMedianMultiple:
      median_multiple = options.median_multiple();
      if (!(median_multiple > 0) || !std::isfinite(median_multiple)) {
        errors.Add("options.median_multiple", absl::StrCat("must be > 0, got ", median_multiple));
      }
      break;
    case NormClipOptions::BOUND_NOT_SET:
      break;
  }
  std::unique_ptr<fl::Aggregator> base = CreateBaseAggregator(options.base(), kName, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<NormClip>(std::move(base), max_norm, median_multiple);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "norm_clip", NormClipOptions, CreateNormClip);
FL_CONFORMANCE_REASON("norm_clip", kNoPartialSums,
                      "with the adaptive bound (median_multiple, the default) no update is "
                      "clipped before the round's median norm is known, so every update is "
                      "held; with max_norm it has its base's sums when the base has them");

}  // namespace
}  // namespace aggregators
