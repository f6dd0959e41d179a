#include "fl/privacy/rdp_conversion.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fl::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Below this order the CKS bound is numerically unstable (and no tighter than the
// KL bound); dp_accounting's threshold.
constexpr double kMinCksOrder = 1.01;

absl::Status CheckRdp(absl::Span<const double> orders, absl::Span<const double> rdp) {
  if (orders.empty()) return absl::InvalidArgumentError("orders: must not be empty");
  if (orders.size() != rdp.size()) {
    return absl::InvalidArgumentError(absl::StrCat("rdp: must have one value per order (",
                                                   orders.size(), "), got ", rdp.size()));
  }
  for (size_t i = 0; i < orders.size(); ++i) {
    // Written so that NaN fails too.
    if (!(orders[i] >= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("orders[", i, "]: must be >= 1, got ", orders[i]));
    }
    if (std::isnan(rdp[i])) {
      return absl::InvalidArgumentError(absl::StrCat("rdp[", i, "]: must not be NaN"));
    }
  }
  return absl::OkStatus();
}

// Index of the first smallest value, as numpy's argmin.
size_t ArgMin(const std::vector<double>& values) {
  size_t best = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] < values[best]) best = i;
  }
  return best;
}

double CksEpsilon(double order, double rdp, double delta) {
  if (rdp < 0) return 0;
  if (delta * delta + std::expm1(-rdp) > 0) return 0;
  if (order > kMinCksOrder) {
    return rdp + std::log1p(-1 / order) - std::log(delta * order) / (order - 1);
  }
  return kInf;
}

double ClassicEpsilon(double order, double rdp, double delta) {
  if (rdp < 0) return 0;
  if (order == 1) return kInf;
  return rdp - std::log(delta) / (order - 1);
}

double CksLogDelta(double order, double rdp, double epsilon) {
  double log_delta = 0;
  if (rdp <= 0) {
    log_delta = -kInf;
  } else {
    log_delta = 0.5 * std::log1p(-std::exp(-rdp));  // the KL bound
  }
  if (order > kMinCksOrder) {
    const double bound = (order - 1) * (rdp - epsilon + std::log1p(-1 / order)) - std::log(order);
    log_delta = std::min(log_delta, bound);
  }
  return log_delta;
}

double ClassicLogDelta(double order, double rdp, double epsilon) {
  if (rdp < 0) return -kInf;
  if (order == 1) return 0;
  return (order - 1) * (rdp - epsilon);
}

}  // namespace

absl::string_view ConversionName(Conversion conversion) {
  switch (conversion) {
    case Conversion::kCks:
      return "cks";
    case Conversion::kClassic:
      return "classic";
  }
  return "unknown";
}

absl::StatusOr<Conversion> ParseConversion(absl::string_view name) {
  if (name == "cks") return Conversion::kCks;
  if (name == "classic") return Conversion::kClassic;
  return absl::InvalidArgumentError(
      absl::StrCat("conversion: must be cks or classic, got \"", name, "\""));
}

absl::StatusOr<EpsilonAndOrder> EpsilonFromRdp(absl::Span<const double> orders,
                                               absl::Span<const double> rdp, double delta,
                                               Conversion conversion) {
  if (absl::Status status = CheckRdp(orders, rdp); !status.ok()) return status;
  if (!(delta > 0 && delta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("delta: must be in (0, 1), got ", delta));
  }
  std::vector<double> epsilons(orders.size());
  for (size_t i = 0; i < orders.size(); ++i) {
    epsilons[i] = conversion == Conversion::kCks ? CksEpsilon(orders[i], rdp[i], delta)
                                                 : ClassicEpsilon(orders[i], rdp[i], delta);
  }
  const size_t best = ArgMin(epsilons);
  return EpsilonAndOrder{std::max(0.0, epsilons[best]), orders[best]};
}

absl::StatusOr<DeltaAndOrder> DeltaFromRdp(absl::Span<const double> orders,
                                           absl::Span<const double> rdp, double epsilon,
                                           Conversion conversion) {
  if (absl::Status status = CheckRdp(orders, rdp); !status.ok()) return status;
  if (!(epsilon >= 0 && std::isfinite(epsilon))) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon: must be finite and >= 0, got ", epsilon));
  }
  std::vector<double> log_deltas(orders.size());
  for (size_t i = 0; i < orders.size(); ++i) {
    log_deltas[i] = conversion == Conversion::kCks ? CksLogDelta(orders[i], rdp[i], epsilon)
                                                   : ClassicLogDelta(orders[i], rdp[i], epsilon);
  }
  const size_t best = ArgMin(log_deltas);
  return DeltaAndOrder{std::min(std::exp(log_deltas[best]), 1.0), orders[best]};
}

}  // namespace fl::privacy
