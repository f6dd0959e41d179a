#ifndef AGGREGATORS_MAECHO_QP_WEIGHTS_H_
#define AGGREGATORS_MAECHO_QP_WEIGHTS_H_

// MA-Echo's client weights from the paper's Eq. 6 (a one-class-SVM-like QP):
//   alpha = argmin 1/2 alpha^T A alpha   subject to  sum alpha = 1,  0 <= alpha <= bound,
// with A the Gram matrix of the clients' projected differences (positive
// semidefinite), solved by ALGLIB's dense interior-point QP solver.

#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace aggregators {

// `gram`: {N, N}, symmetric positive semidefinite. Fails when N * bound < 1 (no
// feasible point) or the solver does not converge.
absl::StatusOr<std::vector<double>> SimplexBoxQp(const at::Tensor& gram, double bound);

}  // namespace aggregators

#endif  // AGGREGATORS_MAECHO_QP_WEIGHTS_H_
