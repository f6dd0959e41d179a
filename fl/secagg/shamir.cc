#include "fl/secagg/shamir.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace fl::secagg {
namespace {

constexpr size_t kChunkBytes = 7;

uint64_t Reduce(unsigned __int128 x) {
  // x mod (2^61 - 1) by folding the high bits onto the low ones.
  uint64_t folded = static_cast<uint64_t>(x & kShamirPrime) + static_cast<uint64_t>(x >> 61);
  folded = (folded & kShamirPrime) + (folded >> 61);
  return folded >= kShamirPrime ? folded - kShamirPrime : folded;
}

uint64_t Add(uint64_t a, uint64_t b) { return Reduce(static_cast<unsigned __int128>(a) + b); }
uint64_t Sub(uint64_t a, uint64_t b) { return Add(a, kShamirPrime - b); }
uint64_t Mul(uint64_t a, uint64_t b) { return Reduce(static_cast<unsigned __int128>(a) * b); }

uint64_t Pow(uint64_t base, uint64_t exponent) {
  uint64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) result = Mul(result, base);
    base = Mul(base, base);
    exponent >>= 1;
  }
  return result;
}

uint64_t Inverse(uint64_t a) { return Pow(a, kShamirPrime - 2); }  // Fermat

size_t NumChunks(size_t secret_size) { return (secret_size + kChunkBytes - 1) / kChunkBytes; }

}  // namespace

std::vector<ShamirShare> ShamirSplit(absl::Span<const uint8_t> secret, int threshold,
                                     int num_shares, Prg& randomness) {
  CHECK(threshold >= 1 && threshold <= num_shares) << threshold << " of " << num_shares;
  const size_t chunks = NumChunks(secret.size());
  std::vector<ShamirShare> shares(num_shares);
  for (int i = 0; i < num_shares; ++i) {
    shares[i].x = static_cast<uint64_t>(i + 1);
    shares[i].y.resize(chunks);
  }
  std::vector<uint64_t> coefficients(threshold);
  for (size_t c = 0; c < chunks; ++c) {
    uint64_t constant = 0;
    for (size_t b = 0; b < kChunkBytes && c * kChunkBytes + b < secret.size(); ++b) {
      constant |= uint64_t{secret[c * kChunkBytes + b]} << (8 * b);
    }
    coefficients[0] = constant;
    for (int k = 1; k < threshold; ++k) coefficients[k] = Reduce(randomness.NextUint64());
    for (ShamirShare& share : shares) {
      uint64_t value = 0;  // Horner
      for (int k = threshold - 1; k >= 0; --k) value = Add(Mul(value, share.x), coefficients[k]);
      share.y[c] = value;
    }
  }
  return shares;
}

absl::StatusOr<std::vector<uint8_t>> ShamirReconstruct(absl::Span<const ShamirShare> shares,
                                                       int threshold, size_t secret_size) {
  if (threshold < 1 || static_cast<int>(shares.size()) < threshold) {
    return absl::InvalidArgumentError(absl::StrCat("shamir: ", shares.size(),
                                                   " shares, at least ", threshold, " needed"));
  }
  const size_t chunks = NumChunks(secret_size);
  std::set<uint64_t> seen;
  for (int i = 0; i < threshold; ++i) {
    const ShamirShare& s = shares[i];
    if (s.x == 0 || s.x >= kShamirPrime || !seen.insert(s.x).second) {
      return absl::InvalidArgumentError(absl::StrCat("shamir: share point ", s.x,
                                                     " is zero, out of the field or repeated"));
    }
    if (s.y.size() != chunks) {
      return absl::InvalidArgumentError(absl::StrCat("shamir: share ", s.x, " holds ", s.y.size(),
                                                     " values, a ", secret_size,
                                                     "-byte secret needs ", chunks));
    }
    for (uint64_t y : s.y) {
      if (y >= kShamirPrime) {
        return absl::InvalidArgumentError(absl::StrCat("shamir: share ", s.x, " has a value outside the field"));
      }
    }
  }
  // Lagrange basis at 0: l_i = prod_{j != i} x_j / (x_j - x_i).
  std::vector<uint64_t> basis(threshold);
  for (int i = 0; i < threshold; ++i) {
    uint64_t numerator = 1, denominator = 1;
    for (int j = 0; j < threshold; ++j) {
      if (j == i) continue;
      numerator = Mul(numerator, shares[j].x);
      denominator = Mul(denominator, Sub(shares[j].x, shares[i].x));
    }
    basis[i] = Mul(numerator, Inverse(denominator));
  }
  std::vector<uint8_t> secret(secret_size);
  for (size_t c = 0; c < chunks; ++c) {
    uint64_t value = 0;
    for (int i = 0; i < threshold; ++i) value = Add(value, Mul(basis[i], shares[i].y[c]));
    if (value >> (8 * kChunkBytes) != 0) {
      return absl::InvalidArgumentError("shamir: the shares do not interpolate to a secret (mixed or corrupt shares)");
    }
    for (size_t b = 0; b < kChunkBytes && c * kChunkBytes + b < secret_size; ++b) {
      secret[c * kChunkBytes + b] = static_cast<uint8_t>(value >> (8 * b));
    }
  }
  return secret;
}

}  // namespace fl::secagg
