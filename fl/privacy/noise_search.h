#ifndef FL_PRIVACY_NOISE_SEARCH_H_
#define FL_PRIVACY_NOISE_SEARCH_H_

// The smallest noise multiplier z that keeps a run within a target epsilon: T
// steps of sampling rate q, at delta, accounted by an RdpAccountant with the
// default orders. Epsilon falls as z grows, so the search brackets z in
// [min_noise_multiplier, max_noise_multiplier] and bisects it geometrically until
// the bracket's ends are within a factor 1 + relative_tolerance:
//
//   returned z meets the target:          Epsilon(z) <= target_epsilon
//   and z / (1 + relative_tolerance) does not (unless z = min_noise_multiplier).
//
// That costs about log2(log(max / min) / relative_tolerance) accountant
// evaluations (26 with the defaults).
//
//   FL_ASSIGN_OR_RETURN(auto found, fl::privacy::SmallestNoiseMultiplier(
//       /*target_epsilon=*/1.0, /*sampling_rate=*/0.01, /*steps=*/1000,
//       /*delta=*/1e-5, Sampling::kPoisson, Conversion::kCks));
//   // found.noise_multiplier, found.epsilon (<= 1.0), found.order

#include <cstdint>

#include "absl/status/statusor.h"
#include "fl/privacy/pld_accountant.h"
#include "fl/privacy/rdp_accountant.h"
#include "fl/privacy/rdp_conversion.h"

namespace fl::privacy {

struct NoiseSearchOptions {
  // The range searched. Below 0.01 a Gaussian step is all but useless as privacy;
  // above 10000 the noise swamps any realistic cohort's sum.
  double min_noise_multiplier = 0.01;
  double max_noise_multiplier = 1e4;
  // The bracket's relative width at which the search stops, in (0, 1).
  double relative_tolerance = 1e-6;
};

struct NoiseSearchResult {
  double noise_multiplier;
  double epsilon;  // at noise_multiplier, <= the target
  double order;    // the order achieving epsilon
};

// Errors (InvalidArgument, naming the argument): target_epsilon not finite and
// > 0, sampling_rate outside [0, 1], steps negative, delta outside (0, 1), options
// out of range. OutOfRange when even max_noise_multiplier exceeds the target (the
// message gives the epsilon it reaches). When min_noise_multiplier already meets
// the target (e.g. q = 0 or no steps), that is what is returned.
absl::StatusOr<NoiseSearchResult> SmallestNoiseMultiplier(
    double target_epsilon, double sampling_rate, int64_t steps, double delta, Sampling sampling,
    Conversion conversion = Conversion::kCks, const NoiseSearchOptions& options = {});

// The same search accounted by a PldAccountant (Poisson sampling, add/remove-one),
// whose epsilon is at most RDP's: the bracket starts at SmallestNoiseMultiplier's
// answer and widens by a factor 1.25 per step (down while the target is still
// met, up otherwise), which keeps the PLD off the tiny noise multipliers whose
// loss grids would not fit in memory; then it bisects as above. `order` is 0 in
// the result. Errors: as SmallestNoiseMultiplier, and the accountant's
// (ResourceExhausted when a grid would be too large).
absl::StatusOr<NoiseSearchResult> SmallestNoiseMultiplierPld(
    double target_epsilon, double sampling_rate, int64_t steps, double delta,
    const PldOptions& pld_options = {}, const NoiseSearchOptions& options = {});

}  // namespace fl::privacy

#endif  // FL_PRIVACY_NOISE_SEARCH_H_
