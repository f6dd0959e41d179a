#ifndef FL_PRIVACY_LOG_SPACE_H_
#define FL_PRIVACY_LOG_SPACE_H_

// Arithmetic on numbers held as their natural logarithms, for the RDP bounds:
// their terms span thousands of orders of magnitude, so they are summed as logs.
// -infinity stands for 0. These mirror the helpers of Google's dp_accounting
// (dp_accounting/rdp/rdp_privacy_accountant.py) so the bounds built on them
// follow its arithmetic step for step.
//
//   double log_sum = fl::privacy::LogAdd(std::log(2.0), std::log(3.0));  // log 5

namespace fl::privacy {

// log(exp(log_x) + exp(log_y)).
double LogAdd(double log_x, double log_y);

// exp(log_x) - exp(log_y) as a sign and the log of its magnitude; equal inputs
// give {true, -infinity} (zero counts as positive).
struct SignedLog {
  bool positive;
  double log_magnitude;
};
SignedLog LogSubSign(double log_x, double log_y);

// log |binomial(n, k)| = lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1), for
// real n and k (the fractional-order series needs non-integer n, where the
// coefficient may be negative: only its magnitude is returned, as
// scipy.special.gammaln gives).
double LogComb(double n, double k);

// log(erfc(x)), accurate far into the tail where erfc(x) underflows
// (x above about 26), where it uses the asymptotic series of erfc.
double LogErfc(double x);

}  // namespace fl::privacy

#endif  // FL_PRIVACY_LOG_SPACE_H_
