#ifndef FL_PRIVACY_FIXED_SIZE_SUBSAMPLED_GAUSSIAN_H_
#define FL_PRIVACY_FIXED_SIZE_SUBSAMPLED_GAUSSIAN_H_

// Rényi DP of one step of the Gaussian mechanism on a fixed-size cohort: m of the
// n clients, drawn uniformly without replacement (fl::SampleCohort, the server's
// default sampling), q = m / n, noise multiplier z. The guarantee is for the
// replace-one ("substitution") relation: datasets of the same n clients that
// differ in one client's data. n is public. It is NOT an add/remove-one
// guarantee; that needs Poisson sampling (poisson_subsampled_gaussian.h).
//
// Wang, Balle, Kasiviswanathan 2019, "Subsampled Rényi Differential Privacy and
// Analytical Moments Accountant" (arXiv:1808.00087), Theorem 27 (the
// Gaussian-specific strengthening of their Theorem 9), with the Gaussian's
// cumulant generating function eps(x)·(x - 1) = x (x - 1) / (2 z^2). Computed as
// Google's dp_accounting computes it (_compute_rdp_sample_wor_gaussian_scalar,
// _compute_rdp_sample_wor_gaussian_int, _get_forward_diffs in
// rdp/rdp_privacy_accountant.py), in log space:
//  - integer order alpha <= 256: the exact bound of Theorem 27, with the forward
//    differences of exp(CGF) taken in signed log space (O(alpha^2) work);
//  - integer order alpha > 256: each term i >= 3 bounded by its simpler second
//    branch, 2 exp(CGF(i - 1)) (O(alpha) work);
//  - fractional order alpha: the bound is only proved at integers, so the CGF
//    (alpha - 1)·RDP is interpolated linearly between floor(alpha) and
//    ceil(alpha) (their Corollary 10: the CGF is convex), then divided by
//    alpha - 1. Order 1 contributes CGF 0.
//  - q = 0 gives 0 (even with z = 0); z = 0 with q > 0 gives +infinity; q = 1 is
//    the plain Gaussian mechanism, alpha / (2 z^2) (at every order, fractional
//    too, as dp_accounting).
//
//   double rdp = fl::privacy::FixedSizeSubsampledGaussianRdp(0.01, 1.0, 8.0);  // one step

#include <vector>

#include "fl/privacy/log_space.h"

namespace fl::privacy {

// RDP at `order` of one step, cohort fraction `q` = m / n, noise multiplier `z`.
// T steps compose to T times this.
// REQUIRES: 0 <= q <= 1, 0 <= z < infinity, 1 < order < infinity.
double FixedSizeSubsampledGaussianRdp(double q, double z, double order);

namespace internal {
// The forward differences at 0 of the positive sequence exp(log_values[j]): entry
// k - 1 is sum_j (-1)^(k-j) C(k, j) exp(log_values[j]), k = 1..m-1, as a sign and
// a log magnitude; dp_accounting's _stable_inplace_diff_in_log, branch for branch.
std::vector<SignedLog> LogForwardDifferences(std::vector<double> log_values);

// (alpha - 1) * RDP(alpha) for integer alpha >= 1 (0 at alpha = 1), for 0 < q < 1
// and z > 0: dp_accounting's _compute_rdp_sample_wor_gaussian_int. Exposed for tests.
double FixedSizeCgfInt(double q, double z, int alpha);
}  // namespace internal

}  // namespace fl::privacy

#endif  // FL_PRIVACY_FIXED_SIZE_SUBSAMPLED_GAUSSIAN_H_
