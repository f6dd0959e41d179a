#include "fl/privacy/log_space.h"

#include <math.h>  // lgamma_r: std::lgamma writes the global signgam, a data race.

#include <algorithm>
#include <cmath>
#include <limits>

namespace fl::privacy {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// log |Gamma(x)|, without touching the global signgam.
double LogAbsGamma(double x) {
  int sign = 0;
  return ::lgamma_r(x, &sign);
}

}  // namespace

double LogAdd(double log_x, double log_y) {
  const double a = std::min(log_x, log_y);
  const double b = std::max(log_x, log_y);
  if (a == -kInf) return b;
  // exp(a) + exp(b) = (exp(a - b) + 1) exp(b), with a - b <= 0: no overflow.
  return std::log1p(std::exp(a - b)) + b;
}

SignedLog LogSubSign(double log_x, double log_y) {
  if (log_x > log_y) return {true, log_x + std::log1p(-std::exp(log_y - log_x))};
  if (log_x < log_y) return {false, log_y + std::log1p(-std::exp(log_x - log_y))};
  return {true, -kInf};
}

double LogComb(double n, double k) {
  return LogAbsGamma(n + 1) - LogAbsGamma(k + 1) - LogAbsGamma(n - k + 1);
}

double LogErfc(double x) {
  // For x < -3, erfc(x) = 2 - erfc(-x) is within 1e-5 of 2: log1p keeps the digits.
  if (x < -3) return std::log(2.0) + std::log1p(-0.5 * std::erfc(-x));
  // glibc's erfc keeps full relative precision until it nears the denormals
  // (erfc(26) ~ 6e-296).
  if (x < 26) return std::log(std::erfc(x));
  // erfc(x) = exp(-x^2) / (x sqrt(pi)) * (1 - 1/(2x^2) + 3/(2x^2)^2 - 15/(2x^2)^3 ...);
  // at x >= 26 the terms fall by a factor 1/(2x^2) * (2k - 1) <= 1/30 each, so
  // eight of them leave an error far below a double's precision.
  const double inv_2x2 = 1.0 / (2.0 * x * x);
  double term = 1.0;
  double series = 1.0;
  for (int k = 1; k <= 8; ++k) {
    term *= -(2.0 * k - 1.0) * inv_2x2;
    series += term;
  }
  return -x * x - std::log(x) - 0.5 * std::log(M_PI) + std::log(series);
}

}  // namespace fl::privacy
