#ifndef FL_PRIVACY_RDP_ACCOUNTANT_H_
#define FL_PRIVACY_RDP_ACCOUNTANT_H_

// Tracks the Rényi DP of a run of subsampled Gaussian steps (DP-FedAvg rounds,
// DP-SGD steps) at a fixed list of orders and turns it into (epsilon, delta).
// RDP composes by addition, so each Compose adds steps x the one-step RDP; rounds
// may differ in sampling rate and noise.
//
// Which guarantee you get depends on how cohorts are drawn:
//  - Sampling::kPoisson, each client independently with probability q
//    (fl::SamplePoissonCohort): add/remove-one-client DP
//    (poisson_subsampled_gaussian.h, Mironov, Talwar, Zhang 2019).
//  - Sampling::kFixedSize, m of n clients without replacement, q = m / n
//    (fl::SampleCohort): replace-one-client DP, n public
//    (fixed_size_subsampled_gaussian.h, Wang, Balle, Kasiviswanathan 2019).
// The two are different neighbouring relations, so one accountant holds only one
// of them: the first Compose fixes it and a Compose with the other is refused.
//
// A server, once per round:
//
//   fl::privacy::RdpAccountant accountant;   // the default orders, rdp_orders.h
//   FL_RETURN_IF_ERROR(accountant.Compose(q, z, /*steps=*/1, Sampling::kPoisson));
//   FL_ASSIGN_OR_RETURN(auto spent, accountant.Epsilon(/*delta=*/1e-5));
//   LOG(INFO) << "epsilon " << spent.epsilon << " (order " << spent.order << ")";
//
// Not thread-safe; copyable.

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fl/privacy/rdp_conversion.h"

namespace fl::privacy {

enum class Sampling {
  kPoisson,    // add/remove-one guarantee
  kFixedSize,  // replace-one guarantee
};

// "poisson" / "fixed_size", and back. The parse error lists the accepted names.
absl::string_view SamplingName(Sampling sampling);
absl::StatusOr<Sampling> ParseSampling(absl::string_view name);

// The one-step RDP of the subsampled Gaussian mechanism at each of `orders`.
// Errors (InvalidArgument, naming the argument): sampling_rate outside [0, 1],
// noise_multiplier negative or not finite, an order outside (1, kMaxRdpOrder].
absl::StatusOr<std::vector<double>> SubsampledGaussianRdp(double sampling_rate,
                                                          double noise_multiplier,
                                                          Sampling sampling,
                                                          const std::vector<double>& orders);

// Orders above this are refused: integer orders cost O(order) (Poisson) or up to
// O(order^2) (fixed-size) work, and no useful bound needs them.
inline constexpr double kMaxRdpOrder = 1e5;

class RdpAccountant {
 public:
  // Tracks the default orders (kDefaultRdpOrders).
  RdpAccountant();

  // Tracks `orders` instead. Errors: empty, or an order not in (1, kMaxRdpOrder].
  static absl::StatusOr<RdpAccountant> Create(std::vector<double> orders);

  // Adds `steps` steps, each sampling with rate `sampling_rate` (fixed-size: m / n)
  // and adding Gaussian noise of `noise_multiplier` times the L2 sensitivity.
  // Errors, leaving the accountant unchanged (InvalidArgument, naming the
  // argument): sampling_rate outside [0, 1]; noise_multiplier negative or not
  // finite; steps negative; (FailedPrecondition) `sampling` differs from that of
  // an earlier Compose. noise_multiplier 0 with sampling_rate > 0 is allowed and
  // makes every later epsilon +infinity.
  absl::Status Compose(double sampling_rate, double noise_multiplier, int64_t steps,
                       Sampling sampling);

  // The smallest epsilon of an (epsilon, delta) guarantee for everything composed
  // so far, and the order giving it (0 before any Compose). Errors: delta outside
  // (0, 1).
  absl::StatusOr<EpsilonAndOrder> Epsilon(double delta,
                                          Conversion conversion = Conversion::kCks) const;

  // The smallest delta for `epsilon`. Errors: epsilon negative or not finite.
  absl::StatusOr<DeltaAndOrder> Delta(double epsilon,
                                      Conversion conversion = Conversion::kCks) const;

  // Replaces the accumulated RDP by `rdp` (one value per order, as rdp() gives it:
  // >= 0 or +infinity), for a run resumed from a checkpoint; the sampling is fixed
  // again by the next Compose. Errors (InvalidArgument): a size other than the
  // number of orders, a negative or NaN value. The accountant is then unchanged.
  absl::Status RestoreRdp(const std::vector<double>& rdp);

  const std::vector<double>& orders() const { return orders_; }
  // Accumulated RDP at each order (+infinity where unbounded).
  const std::vector<double>& rdp() const { return rdp_; }
  // The sampling of the first Compose, which fixes the neighbouring relation.
  std::optional<Sampling> sampling() const { return sampling_; }

 private:
  explicit RdpAccountant(std::vector<double> orders);

  std::vector<double> orders_;
  std::vector<double> rdp_;
  std::optional<Sampling> sampling_;
};

}  // namespace fl::privacy

#endif  // FL_PRIVACY_RDP_ACCOUNTANT_H_
