#include "fl/staleness.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace fl {

absl::Status Staleness::Check(const std::string& path) const {
  if (!(a >= 0) || !std::isfinite(a)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".a: must be >= 0, got ", a));
  }
  if (b < 0) return absl::InvalidArgumentError(absl::StrCat(path, ".b: must be >= 0, got ", b));
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

}  // namespace fl
