#include "fl/privacy/rdp_accountant.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fl/privacy/fixed_size_subsampled_gaussian.h"
#include "fl/privacy/poisson_subsampled_gaussian.h"
#include "fl/privacy/rdp_orders.h"

namespace fl::privacy {
namespace {

absl::Status CheckOrders(const std::vector<double>& orders) {
  if (orders.empty()) return absl::InvalidArgumentError("orders: must not be empty");
  for (size_t i = 0; i < orders.size(); ++i) {
    if (!(orders[i] > 1 && orders[i] <= kMaxRdpOrder)) {
      return absl::InvalidArgumentError(
          absl::StrCat("orders[", i, "]: must be in (1, ", kMaxRdpOrder, "], got ", orders[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view SamplingName(Sampling sampling) {
  switch (sampling) {
    case Sampling::kPoisson:
      return "poisson";
    case Sampling::kFixedSize:
      return "fixed_size";
  }
  return "unknown";
}

absl::StatusOr<Sampling> ParseSampling(absl::string_view name) {
  if (name == "poisson") return Sampling::kPoisson;
  if (name == "fixed_size") return Sampling::kFixedSize;
  return absl::InvalidArgumentError(
      absl::StrCat("sampling: must be poisson or fixed_size, got \"", name, "\""));
}

absl::StatusOr<std::vector<double>> SubsampledGaussianRdp(double sampling_rate,
                                                          double noise_multiplier,
                                                          Sampling sampling,
                                                          const std::vector<double>& orders) {
  if (!(sampling_rate >= 0 && sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_rate: must be in [0, 1], got ", sampling_rate));
  }
  if (!(noise_multiplier >= 0 && std::isfinite(noise_multiplier))) {
    return absl::InvalidArgumentError(
        absl::StrCat("noise_multiplier: must be finite and >= 0, got ", noise_multiplier));
  }
  if (absl::Status status = CheckOrders(orders); !status.ok()) return status;
  std::vector<double> rdp(orders.size());
  for (size_t i = 0; i < orders.size(); ++i) {
    rdp[i] = sampling == Sampling::kPoisson
                 ? PoissonSubsampledGaussianRdp(sampling_rate, noise_multiplier, orders[i])
                 : FixedSizeSubsampledGaussianRdp(sampling_rate, noise_multiplier, orders[i]);
  }
  return rdp;
}

RdpAccountant::RdpAccountant()
    : RdpAccountant(std::vector<double>(kDefaultRdpOrders.begin(), kDefaultRdpOrders.end())) {}

RdpAccountant::RdpAccountant(std::vector<double> orders)
    : orders_(std::move(orders)), rdp_(orders_.size(), 0.0) {}

absl::StatusOr<RdpAccountant> RdpAccountant::Create(std::vector<double> orders) {
  if (absl::Status status = CheckOrders(orders); !status.ok()) return status;
  return RdpAccountant(std::move(orders));
}

absl::Status RdpAccountant::Compose(double sampling_rate, double noise_multiplier, int64_t steps,
                                    Sampling sampling) {
  if (steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("steps: must be >= 0, got ", steps));
  }
  if (sampling_.has_value() && *sampling_ != sampling) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sampling: this accountant already holds ", SamplingName(*sampling_),
        " steps (", *sampling_ == Sampling::kPoisson ? "add/remove-one" : "replace-one",
        " guarantee); ", SamplingName(sampling),
        " steps bound another neighbouring relation and cannot be added to it"));
  }
  absl::StatusOr<std::vector<double>> step_rdp =
      SubsampledGaussianRdp(sampling_rate, noise_multiplier, sampling, orders_);
  if (!step_rdp.ok()) return step_rdp.status();
  // Zero steps change nothing, not even the relation (and 0 x infinity is NaN).
  if (steps == 0) return absl::OkStatus();
  sampling_ = sampling;
  for (size_t i = 0; i < orders_.size(); ++i) {
    rdp_[i] += static_cast<double>(steps) * (*step_rdp)[i];
  }
  return absl::OkStatus();
}

absl::Status RdpAccountant::RestoreRdp(const std::vector<double>& rdp) {
  if (rdp.size() != orders_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("rdp: holds ", rdp.size(),
                                                   " values, one per order expected (",
                                                   orders_.size(), ")"));
  }
  for (size_t i = 0; i < rdp.size(); ++i) {
    if (!(rdp[i] >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rdp: value ", i, " (order ", orders_[i], ") must be >= 0, got ", rdp[i]));
    }
  }
  rdp_ = rdp;
  return absl::OkStatus();
}

absl::StatusOr<EpsilonAndOrder> RdpAccountant::Epsilon(double delta, Conversion conversion) const {
  return EpsilonFromRdp(orders_, rdp_, delta, conversion);
}

absl::StatusOr<DeltaAndOrder> RdpAccountant::Delta(double epsilon, Conversion conversion) const {
  return DeltaFromRdp(orders_, rdp_, epsilon, conversion);
}

}  // namespace fl::privacy
