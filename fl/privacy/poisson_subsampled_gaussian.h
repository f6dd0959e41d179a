#ifndef FL_PRIVACY_POISSON_SUBSAMPLED_GAUSSIAN_H_
#define FL_PRIVACY_POISSON_SUBSAMPLED_GAUSSIAN_H_

// Rényi DP of one step of the Poisson-subsampled Gaussian mechanism: every client
// joins the round independently with probability q (fl::SamplePoissonCohort), the
// clipped sum of their updates gets Gaussian noise of standard deviation z times
// the clipping norm. The guarantee is for the add/remove-one relation: datasets
// that differ by one client's presence.
//
// Mironov, Talwar, Zhang 2019, "Rényi Differential Privacy of the Sampled Gaussian
// Mechanism" (arXiv:1908.10530): RDP(alpha) = log(A_alpha) / (alpha - 1), with
//   integer alpha:    A_alpha = sum_{i=0..alpha} C(alpha, i) q^i (1-q)^(alpha-i)
//                                 exp((i^2 - i) / (2 z^2))             (section 3.2)
//   fractional alpha: A_alpha = A_0 + A_1, two infinite series over i >= 0 of the
//                     integrals of the mixture ratio below and above
//                     z0 = z^2 log(1/q - 1) + 1/2                      (section 3.3)
// computed exactly as Google's dp_accounting computes them (_compute_log_a_int,
// _compute_log_a_frac in rdp/rdp_privacy_accountant.py), in log space.
//
// Conventions (pinned, and the same as dp_accounting's):
//  - An order is integer when it equals its floor (2.0 is integer; so is
//    1 + 10 / 10.0); every other order takes the fractional series.
//  - In the fractional series C(alpha, i) is taken as |Gamma(alpha + 1)| /
//    (Gamma(i + 1) |Gamma(alpha - i + 1)|), i.e. its magnitude, as dp_accounting's
//    log-gamma gives it.
//  - The series stops once both terms fall and the larger is below e^-30 times the
//    running total; if that has not happened after 1000 terms the order's RDP is
//    +infinity (so it is never the best order) and a warning is logged.
//  - q = 0 gives 0 (even with z = 0); z = 0 with q > 0 gives +infinity; q = 1 is
//    the plain Gaussian mechanism, alpha / (2 z^2).
//
//   double rdp = fl::privacy::PoissonSubsampledGaussianRdp(0.01, 2.5, 5.0);  // one step

namespace fl::privacy {

// RDP at `order` of one step with sampling rate `q` and noise multiplier `z`
// (noise standard deviation / L2 sensitivity). T steps compose to T times this.
// REQUIRES: 0 <= q <= 1, 0 <= z < infinity, 1 < order < infinity (callers
// validate user input first; RdpAccountant::Compose does).
double PoissonSubsampledGaussianRdp(double q, double z, double order);

namespace internal {
// log(A_alpha), for 0 < q < 1 and z > 0. Exposed for tests.
double LogAInt(double q, double z, int alpha);
double LogAFrac(double q, double z, double alpha);
}  // namespace internal

}  // namespace fl::privacy

#endif  // FL_PRIVACY_POISSON_SUBSAMPLED_GAUSSIAN_H_
