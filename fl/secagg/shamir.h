#ifndef FL_SECAGG_SHAMIR_H_
#define FL_SECAGG_SHAMIR_H_

// Shamir secret sharing (Shamir 1979) over the prime field GF(p), p = 2^61 - 1, for
// secure aggregation's key and seed shares. A byte string is cut into 7-byte chunks
// (56 bits < 61), each chunk the constant term of its own random polynomial of
// degree threshold - 1; share x holds every polynomial's value at x. Any threshold
// shares give the secret back by Lagrange interpolation at 0; fewer say nothing
// about it (each chunk is uniform given threshold - 1 values).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fl/secagg/prg.h"

namespace fl::secagg {

inline constexpr uint64_t kShamirPrime = (uint64_t{1} << 61) - 1;

struct ShamirShare {
  uint64_t x = 0;              // the evaluation point, 1..num_shares
  std::vector<uint64_t> y;     // one value per 7-byte chunk of the secret
};

// Splits `secret` into `num_shares` shares at x = 1..num_shares, any `threshold` of
// which reconstruct it; the polynomials' coefficients come from `randomness`.
// REQUIRES: 1 <= threshold <= num_shares < kShamirPrime.
std::vector<ShamirShare> ShamirSplit(absl::Span<const uint8_t> secret, int threshold,
                                     int num_shares, Prg& randomness);

// The secret of `secret_size` bytes from at least `threshold` shares (the first
// `threshold` are used). Errors (InvalidArgument): too few shares, two with the same
// x, a share whose length does not fit `secret_size`, a value outside the field, or
// a reconstructed chunk that is not 7 bytes wide (shares of different secrets).
absl::StatusOr<std::vector<uint8_t>> ShamirReconstruct(absl::Span<const ShamirShare> shares,
                                                       int threshold, size_t secret_size);

}  // namespace fl::secagg

#endif  // FL_SECAGG_SHAMIR_H_
