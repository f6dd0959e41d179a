#include "fl/privacy/noise_search.h"

#include <algorithm>
#include <cmath>
#include <functional>

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

// Given epsilon(lo) > target >= epsilon(hi.noise_multiplier) = hi.epsilon, narrows
// the bracket to a factor 1 + tolerance. Geometric midpoints: the range may span
// six decades.
absl::StatusOr<NoiseSearchResult> Bisect(
    double target_epsilon, double lo, NoiseSearchResult hi, double tolerance,
    const std::function<absl::StatusOr<NoiseSearchResult>(double)>& epsilon_at) {
  while (hi.noise_multiplier > lo * (1 + tolerance)) {
    const double mid = std::sqrt(lo * hi.noise_multiplier);
    if (!(mid > lo && mid < hi.noise_multiplier)) break;  // a tolerance below double precision
    FL_ASSIGN_OR_RETURN(NoiseSearchResult at_mid, epsilon_at(mid));
    if (at_mid.epsilon <= target_epsilon) {
      hi = at_mid;
    } else {
      lo = mid;
    }
  }
  return hi;
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

  return Bisect(target_epsilon, lo, NoiseSearchResult{hi, at_hi.epsilon, at_hi.order},
                options.relative_tolerance, [&](double z) -> absl::StatusOr<NoiseSearchResult> {
                  FL_ASSIGN_OR_RETURN(EpsilonAndOrder at, epsilon_at(z));
                  return NoiseSearchResult{z, at.epsilon, at.order};
                });
}

absl::StatusOr<NoiseSearchResult> SmallestNoiseMultiplierPld(double target_epsilon,
                                                             double sampling_rate, int64_t steps,
                                                             double delta,
                                                             const PldOptions& pld_options,
                                                             const NoiseSearchOptions& options) {
  FL_ASSIGN_OR_RETURN(PldAccountant empty, PldAccountant::Create(pld_options));
  // Where RDP cannot meet the target the PLD still may: start at the top then.
  const absl::StatusOr<NoiseSearchResult> rdp = SmallestNoiseMultiplier(
      target_epsilon, sampling_rate, steps, delta, Sampling::kPoisson, Conversion::kCks, options);
  if (!rdp.ok() && rdp.status().code() != absl::StatusCode::kOutOfRange) return rdp.status();
  const double start = rdp.ok() ? rdp->noise_multiplier : options.max_noise_multiplier;
  const auto epsilon_at = [&](double z) -> absl::StatusOr<NoiseSearchResult> {
    PldAccountant accountant = empty;
    FL_RETURN_IF_ERROR(accountant.Compose(sampling_rate, z, steps, Sampling::kPoisson));
    FL_ASSIGN_OR_RETURN(const double epsilon, accountant.Epsilon(delta));
    return NoiseSearchResult{z, epsilon, 0};
  };
  constexpr double kStep = 1.25;
  FL_ASSIGN_OR_RETURN(NoiseSearchResult at, epsilon_at(start));
  if (at.epsilon <= target_epsilon) {
    NoiseSearchResult meets = at;
    while (true) {
      const double z = meets.noise_multiplier / kStep;
      if (z < options.min_noise_multiplier) {
        FL_ASSIGN_OR_RETURN(NoiseSearchResult at_min, epsilon_at(options.min_noise_multiplier));
        if (at_min.epsilon <= target_epsilon) return at_min;
        return Bisect(target_epsilon, options.min_noise_multiplier, meets,
                      options.relative_tolerance, epsilon_at);
      }
      FL_ASSIGN_OR_RETURN(at, epsilon_at(z));
      if (at.epsilon > target_epsilon) {
        return Bisect(target_epsilon, z, meets, options.relative_tolerance, epsilon_at);
      }
      meets = at;
    }
  }
  double fails = at.noise_multiplier;
  while (true) {
    const double z = std::min(fails * kStep, options.max_noise_multiplier);
    FL_ASSIGN_OR_RETURN(at, epsilon_at(z));
    if (at.epsilon <= target_epsilon) {
      return Bisect(target_epsilon, fails, at, options.relative_tolerance, epsilon_at);
    }
    if (z >= options.max_noise_multiplier) {
      return absl::OutOfRangeError(absl::StrCat(
          "target_epsilon: ", target_epsilon, " cannot be met with noise_multiplier <= ", z,
          " (it gives epsilon ", at.epsilon, ")"));
    }
    fails = z;
  }
}

}  // namespace fl::privacy
