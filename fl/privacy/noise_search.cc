#include "fl/privacy/noise_search.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "fl/status_macros.h"

namespace fl::privacy {
namespace {

absl::Status CheckArguments(double target_epsilon, double sampling_rate, int64_t steps,
                            double delta, const NoiseSearchOptions& options) {
  if (!(target_epsilon > 0 && std::isfinite(target_epsilon))) {
    return absl::InvalidArgumentError(
        absl::StrCat("target_epsilon: must be finite and > 0, got ", target_epsilon));
  }
  if (!(sampling_rate >= 0 && sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_rate: must be in [0, 1], got ", sampling_rate));
  }
  if (steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("steps: must be >= 0, got ", steps));
  }
  if (!(delta > 0 && delta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("delta: must be in (0, 1), got ", delta));
  }
  if (!(options.min_noise_multiplier > 0 &&
        options.min_noise_multiplier < options.max_noise_multiplier &&
        std::isfinite(options.max_noise_multiplier))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options: need 0 < min_noise_multiplier < max_noise_multiplier < infinity, got ",
        options.min_noise_multiplier, " and ", options.max_noise_multiplier));
  }
  if (!(options.relative_tolerance > 0 && options.relative_tolerance < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.relative_tolerance: must be in (0, 1), got ", options.relative_tolerance));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NoiseSearchResult> SmallestNoiseMultiplier(double target_epsilon,
                                                          double sampling_rate, int64_t steps,
                                                          double delta, Sampling sampling,
                                                          Conversion conversion,
                                                          const NoiseSearchOptions& options) {
  FL_RETURN_IF_ERROR(CheckArguments(target_epsilon, sampling_rate, steps, delta, options));
  const auto epsilon_at = [&](double z) -> absl::StatusOr<EpsilonAndOrder> {
    RdpAccountant accountant;
    FL_RETURN_IF_ERROR(accountant.Compose(sampling_rate, z, steps, sampling));
    return accountant.Epsilon(delta, conversion);
  };

  double hi = options.max_noise_multiplier;
  FL_ASSIGN_OR_RETURN(EpsilonAndOrder at_hi, epsilon_at(hi));
  if (at_hi.epsilon > target_epsilon) {
    return absl::OutOfRangeError(absl::StrCat(
        "target_epsilon: ", target_epsilon, " cannot be met with noise_multiplier <= ", hi,
        " (it gives epsilon ", at_hi.epsilon, " at order ", at_hi.order, ")"));
  }
  double lo = options.min_noise_multiplier;
  FL_ASSIGN_OR_RETURN(EpsilonAndOrder at_lo, epsilon_at(lo));
  if (at_lo.epsilon <= target_epsilon) return NoiseSearchResult{lo, at_lo.epsilon, at_lo.order};

  // Invariant: epsilon(lo) > target >= epsilon(hi). Geometric midpoints, because
  // the range spans six decades.
  while (hi > lo * (1 + options.relative_tolerance)) {
    const double mid = std::sqrt(lo * hi);
    if (!(mid > lo && mid < hi)) break;  // a tolerance below double precision
    FL_ASSIGN_OR_RETURN(EpsilonAndOrder at_mid, epsilon_at(mid));
    if (at_mid.epsilon <= target_epsilon) {
      hi = mid;
      at_hi = at_mid;
    } else {
      lo = mid;
    }
  }
  return NoiseSearchResult{hi, at_hi.epsilon, at_hi.order};
}

}  // namespace fl::privacy
