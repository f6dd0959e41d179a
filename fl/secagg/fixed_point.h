#ifndef FL_SECAGG_FIXED_POINT_H_
#define FL_SECAGG_FIXED_POINT_H_

// Reals into Z_2^32 and back, for summing them under secure aggregation: each
// value in [-bound, bound] becomes round(x * scale) with unbiased stochastic
// rounding, taken mod 2^32; a sum of at most `max_summands` encodings, read as a
// signed 32-bit integer and divided by scale, is the sum of the values to within
// max_summands / scale. scale is the largest power of two for which no such sum
// can leave [-2^31, 2^31), so nothing wraps.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fl/secagg/prg.h"

namespace fl::secagg {

class FixedPoint {
 public:
  // Errors (InvalidArgument): bound not finite and > 0, max_summands < 1, or a
  // scale below 1 (bound * max_summands >= 2^31: integers would not fit).
  static absl::StatusOr<FixedPoint> Create(double bound, int64_t max_summands);

  double scale() const { return scale_; }
  double bound() const { return bound_; }

  // The encodings of `values`, each clipped to [-bound, bound] first (how many
  // were goes to *clipped), rounded up with probability equal to the fraction
  // (drawn from `randomness`), so that the expected decoding is the clipped value.
  std::vector<uint32_t> Encode(absl::Span<const double> values, Prg& randomness,
                               int64_t* clipped) const;
  // The reals of a sum of encodings.
  std::vector<double> DecodeSum(absl::Span<const uint32_t> sum) const;

 private:
  FixedPoint(double bound, double scale) : bound_(bound), scale_(scale) {}
  double bound_;
  double scale_;
};

}  // namespace fl::secagg

#endif  // FL_SECAGG_FIXED_POINT_H_
