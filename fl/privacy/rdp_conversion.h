#ifndef FL_PRIVACY_RDP_CONVERSION_H_
#define FL_PRIVACY_RDP_CONVERSION_H_

// From Rényi DP at a list of orders to an (epsilon, delta)-DP guarantee: the
// smallest epsilon over the orders (and the order that gives it), or the inverse,
// the smallest delta for a given epsilon.
//
//  - Conversion::kCks (the default): Canonne, Kamath, Steinke 2020 ("The Discrete
//    Gaussian for Differential Privacy", Proposition 12; also Asoodeh et al. 2020,
//    eq. 20), as Google's dp_accounting compute_epsilon / compute_delta apply it:
//      epsilon = r + log1p(-1/alpha) - (log delta + log alpha) / (alpha - 1),
//    used only for alpha > 1.01 (it is numerically unstable as alpha -> 1); an
//    order gives epsilon 0 outright when delta^2 + expm1(-r) > 0 (the KL bound
//    delta <= sqrt(1 - exp(-r))), and +infinity when neither applies.
//  - Conversion::kClassic: Mironov 2017 ("Rényi Differential Privacy",
//    Proposition 3), epsilon = r - log(delta) / (alpha - 1) at every order
//    alpha > 1 (no KL shortcut), what TF Privacy's get_privacy_spent used in its
//    early releases. At each order above 1.01 it is larger than kCks's, by
//    (log alpha) / (alpha - 1) - log1p(-1/alpha).
//
// Edge handling, as dp_accounting: the first order with the smallest epsilon is
// reported; epsilon is clipped at 0; a negative r (only numerical noise can give
// one) counts as epsilon 0 / delta 0; RDP +infinity at every order gives
// epsilon +infinity, reported with the first order. Orders below 1 are refused
// (dp_accounting raises a ValueError for them too).
//
//   auto result = fl::privacy::EpsilonFromRdp(orders, rdp, 1e-5, Conversion::kCks);
//   if (result.ok()) printf("eps %g at order %g\n", result->epsilon, result->order);

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace fl::privacy {

enum class Conversion {
  kCks,      // Canonne-Kamath-Steinke 2020, tighter; the default
  kClassic,  // Mironov 2017
};

// "cks" / "classic", and back. The parse error lists the accepted names.
absl::string_view ConversionName(Conversion conversion);
absl::StatusOr<Conversion> ParseConversion(absl::string_view name);

struct EpsilonAndOrder {
  double epsilon;  // >= 0, may be +infinity
  double order;    // the order that achieves it
};

struct DeltaAndOrder {
  double delta;  // in [0, 1]
  double order;
};

// The smallest epsilon such that RDP `rdp` at `orders` implies (epsilon, delta)-DP.
// Errors (InvalidArgument, naming the argument): orders and rdp of different
// lengths or empty; an order below 1 or NaN; an rdp value that is NaN; delta
// outside (0, 1).
absl::StatusOr<EpsilonAndOrder> EpsilonFromRdp(absl::Span<const double> orders,
                                               absl::Span<const double> rdp, double delta,
                                               Conversion conversion = Conversion::kCks);

// The smallest delta such that RDP `rdp` at `orders` implies (epsilon, delta)-DP.
// kCks follows dp_accounting's compute_delta (including its KL bound); kClassic
// is delta = min over orders of exp((alpha - 1)(r - epsilon)), capped at 1.
// Errors as EpsilonFromRdp, and epsilon not finite and >= 0.
absl::StatusOr<DeltaAndOrder> DeltaFromRdp(absl::Span<const double> orders,
                                           absl::Span<const double> rdp, double epsilon,
                                           Conversion conversion = Conversion::kCks);

}  // namespace fl::privacy

#endif  // FL_PRIVACY_RDP_CONVERSION_H_
