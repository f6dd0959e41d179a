#include "aggregators/maecho/qp_weights.h"

#include <libalglib/optimization.h>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace aggregators {

absl::StatusOr<std::vector<double>> SimplexBoxQp(const at::Tensor& gram, double bound) {
  const int64_t n = gram.size(0);
  if (n * bound < 1.0) {
    return absl::InvalidArgumentError(absl::StrCat("no weights of ", n, " clients in [0, ", bound,
                                                   "] sum to 1: the bound must be >= 1 / ", n));
  }
  // Scaled to a unit diagonal mean: the solver's tolerances are absolute.
  const at::Tensor a = gram.to(at::kCPU, at::kDouble).contiguous();
  const double scale = std::max(a.diagonal().mean().item<double>(), 1e-300);
  try {
    alglib::real_2d_array quadratic;
    quadratic.setlength(n, n);
    alglib::real_2d_array constraint;  // sum alpha = 1
    constraint.setlength(1, n + 1);
    alglib::integer_1d_array kind;
    kind.setlength(1);
    kind[0] = 0;  // equality
    alglib::real_1d_array lower, upper, start;
    lower.setlength(n);
    upper.setlength(n);
    start.setlength(n);
    const double* values = a.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) quadratic[i][j] = values[i * n + j] / scale;
      constraint[0][i] = 1.0;
      lower[i] = 0.0;
      upper[i] = bound;
      start[i] = 1.0 / n;
    }
    constraint[0][n] = 1.0;
    alglib::minqpstate state;
    alglib::minqpcreate(n, state);
    alglib::minqpsetquadraticterm(state, quadratic);
    alglib::minqpsetbc(state, lower, upper);
    alglib::minqpsetlc(state, constraint, kind);
    alglib::minqpsetstartingpoint(state, start);
    alglib::minqpsetscaleautodiag(state);
    alglib::minqpsetalgodenseipm(state, 1e-10);
    alglib::minqpoptimize(state);
    alglib::real_1d_array alpha;
    alglib::minqpreport report;
    alglib::minqpresults(state, alpha, report);
    if (report.terminationtype <= 0) {
      return absl::InternalError(absl::StrCat("the QP solver failed (ALGLIB termination type ",
                                              report.terminationtype, ")"));
    }
    std::vector<double> weights(n);
    for (int64_t i = 0; i < n; ++i) weights[i] = alpha[i];
    return weights;
  } catch (const alglib::ap_error& e) {
    return absl::InternalError(absl::StrCat("ALGLIB: ", e.msg));
  }
}

}  // namespace aggregators
