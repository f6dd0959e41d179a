#include "fl/secagg/fixed_point.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace fl::secagg {

absl::StatusOr<FixedPoint> FixedPoint::Create(double bound, int64_t max_summands) {
  if (!(bound > 0) || !std::isfinite(bound)) {
    return absl::InvalidArgumentError(absl::StrCat("fixed point: bound must be > 0, got ", bound));
  }
  if (max_summands < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("fixed point: max_summands must be >= 1, got ", max_summands));
  }
  // |sum| <= max_summands * (bound * scale + 1) must stay below 2^31.
  const double room = std::ldexp(1.0, 31) / static_cast<double>(max_summands) - 1.0;
  const double scale = std::exp2(std::floor(std::log2(room / bound)));
  if (!(scale >= 1.0) || !std::isfinite(scale)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fixed point: ", max_summands, " values of magnitude up to ", bound,
        " do not fit 32 bits at a resolution of 1 or finer"));
  }
  return FixedPoint(bound, scale);
}

std::vector<uint32_t> FixedPoint::Encode(absl::Span<const double> values, Prg& randomness,
                                         int64_t* clipped) const {
  std::vector<uint32_t> out(values.size());
  int64_t count = 0;
  const std::vector<uint32_t> draws = randomness.Words(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    double x = values[i];
    if (std::isnan(x)) x = 0.0;
    if (x > bound_ || x < -bound_) {
      x = std::clamp(x, -bound_, bound_);
      ++count;
    }
    const double scaled = x * scale_;
    const double floor = std::floor(scaled);
    const double uniform = (static_cast<double>(draws[i]) + 0.5) / 4294967296.0;
    const int64_t rounded = static_cast<int64_t>(floor) + (uniform < scaled - floor ? 1 : 0);
    out[i] = static_cast<uint32_t>(rounded);  // two's complement mod 2^32
  }
  if (clipped != nullptr) *clipped = count;
  return out;
}

std::vector<double> FixedPoint::DecodeSum(absl::Span<const uint32_t> sum) const {
  std::vector<double> out(sum.size());
  for (size_t i = 0; i < sum.size(); ++i) {
    out[i] = static_cast<double>(static_cast<int32_t>(sum[i])) / scale_;
  }
  return out;
}

}  // namespace fl::secagg
