#include "fl/privacy/fixed_size_subsampled_gaussian.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "glog/logging.h"
#include "fl/privacy/log_space.h"

namespace fl::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Up to this order the exact bound is affordable (O(alpha^2)); dp_accounting's max_alpha.
constexpr int kMaxExactOrder = 256;

// Replaces the first n entries of the signed log-space sequence (log_abs, positive)
// by its forward differences: x[j] <- x[j + 1] - x[j]. dp_accounting's
// _stable_inplace_diff_in_log, branch for branch.
void DiffInLog(std::vector<double>& log_abs, std::vector<bool>& positive, int n) {
  for (int j = 0; j < n; ++j) {
    if (positive[j] == positive[j + 1]) {
      const SignedLog diff = LogSubSign(log_abs[j + 1], log_abs[j]);
      log_abs[j] = diff.log_magnitude;
      // Both negative: |x[j+1]| - |x[j]| has the opposite sign of the difference.
      positive[j] = positive[j + 1] ? diff.positive : !diff.positive;
    } else {
      log_abs[j] = LogAdd(log_abs[j], log_abs[j + 1]);
      positive[j] = positive[j + 1];
    }
  }
}

}  // namespace

namespace internal {

std::vector<SignedLog> LogForwardDifferences(std::vector<double> log_values) {
  const int m = static_cast<int>(log_values.size());
  std::vector<bool> positive(m, true);
  std::vector<SignedLog> differences;
  for (int k = 1; k < m; ++k) {
    DiffInLog(log_values, positive, m - k);
    differences.push_back({positive[0], log_values[0]});
  }
  return differences;
}

double FixedSizeCgfInt(double q, double z, int alpha) {
  if (alpha == 1) return 0;
  const double two_z2 = 2.0 * z * z;
  // The Gaussian's CGF at order x + 1, and its RDP at order x.
  const auto cgf = [two_z2](double x) { return x * (x + 1) / two_z2; };
  const auto rdp = [two_z2](double x) { return x / two_z2; };
  const double log_q = std::log(q);
  const double log2 = std::log(2.0);
  const double log4 = std::log(4.0);
  // log(exp(rdp(2)) - 1).
  const double log_f2m1 = rdp(2.0) + std::log1p(-std::exp(-rdp(2.0)));
  // The i = 2 term of Theorem 27.
  const double s2 =
      2 * log_q + LogComb(alpha, 2) + std::min(log4 + log_f2m1, rdp(2.0) + log2);

  double log_a = 0;  // the leading 1
  if (alpha <= kMaxExactOrder) {
    // Forward differences of 1, exp(cgf(0)), ..., exp(cgf(alpha + 1)), as
    // dp_accounting's _get_forward_diffs takes them (the leading 1 is its
    // zero-initialised first entry); only their magnitudes enter the bound.
    std::vector<double> log_values = {0.0};
    for (int x = 0; x <= alpha + 1; ++x) log_values.push_back(cgf(x));
    std::vector<double> deltas;
    for (const SignedLog& difference : LogForwardDifferences(std::move(log_values))) {
      deltas.push_back(difference.log_magnitude);
    }
    for (int i = 2; i <= alpha; ++i) {
      double s = s2;
      if (i > 2) {
        const double delta_lo = deltas[2 * (i / 2) - 1];
        const double delta_hi = deltas[2 * ((i + 1) / 2) - 1];
        s = std::min(log4 + 0.5 * (delta_lo + delta_hi), log2 + cgf(i - 1.0)) + i * log_q +
            LogComb(alpha, i);
      }
      log_a = LogAdd(log_a, s);
    }
  } else {
    for (int i = 2; i <= alpha; ++i) {
      const double s = i == 2 ? s2 : log2 + cgf(i - 1.0) + i * log_q + LogComb(alpha, i);
      log_a = LogAdd(log_a, s);
    }
  }
  return log_a;
}

}  // namespace internal

double FixedSizeSubsampledGaussianRdp(double q, double z, double order) {
  CHECK(q >= 0 && q <= 1) << "q = " << q;
  CHECK(z >= 0 && std::isfinite(z)) << "z = " << z;
  CHECK(order > 1 && std::isfinite(order)) << "order = " << order;
  if (q == 0) return 0;
  if (z == 0) return kInf;
  if (q == 1) return order / (2 * z * z);
  const double floor = std::floor(order);
  if (order == floor) return internal::FixedSizeCgfInt(q, z, static_cast<int>(order)) / (order - 1);
  const double x = internal::FixedSizeCgfInt(q, z, static_cast<int>(floor));
  const double y = internal::FixedSizeCgfInt(q, z, static_cast<int>(floor) + 1);
  const double t = order - floor;
  return ((1 - t) * x + t * y) / (order - 1);
}

}  // namespace fl::privacy
