#include "fl/staleness.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace fl {

absl::Status Staleness::Check(const std::string& path) const {
  if (!(a >= 0) || !std::isfinite(a)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".exponent: must be >= 0, got ", a));
  }
  if (b < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".knee: must be >= 0, got ", b));
  }
  if (max_staleness.has_value() && *max_staleness < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ".max_staleness: must be >= 0, got ", *max_staleness));
  }
  return absl::OkStatus();
}

double Staleness::Weight(int64_t tau) const {
  CHECK_GE(tau, 0) << "staleness counts versions since the update's model";
  if (Drops(tau)) return 0.0;
  switch (kind) {
    case Kind::kConstant:
      return 1.0;
    case Kind::kPolynomial:
      return std::pow(1.0 + static_cast<double>(tau), -a);
    case Kind::kHinge:
      return tau <= b ? 1.0 : 1.0 / (a * static_cast<double>(tau - b) + 1.0);
  }
  LOG(FATAL) << "unknown staleness kind";
}

Staleness StalenessFromSpec(const fedkit::StalenessSpec& spec) {
  Staleness staleness;
  switch (spec.kind()) {
    case fedkit::StalenessSpec::POLYNOMIAL:
      staleness.kind = Staleness::Kind::kPolynomial;
      break;
    case fedkit::StalenessSpec::HINGE:
      staleness.kind = Staleness::Kind::kHinge;
      break;
    default:
      staleness.kind = Staleness::Kind::kConstant;
  }
  staleness.a = spec.exponent();
  staleness.b = spec.knee();
  if (spec.has_max_staleness()) staleness.max_staleness = spec.max_staleness();
  return staleness;
}

}  // namespace fl
