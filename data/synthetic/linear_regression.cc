#include "data/synthetic/linear_regression.h"

#include <ATen/ATen.h>

namespace data {

LinearRegressionProblem MakeLinearRegression(const LinearRegressionConfig& config) {
  at::manual_seed(config.seed);
  LinearRegressionProblem p;
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  for (int64_t i = 0; i < config.clients; ++i) {
    at::Tensor x = at::randn({config.samples_per_client, config.dims}, opts);
    p.x.push_back(x / x.norm(2, {1}, /*keepdim=*/true));
    at::Tensor y = at::randn({config.samples_per_client}, opts);
    p.y.push_back(y / y.norm());
  }
  const at::Tensor x = at::cat(p.x);
  const at::Tensor y = at::cat(p.y);
  // w* = X^T (X X^T)^{-1} y: the solution reached from w = 0 (iterates stay in X's row space).
  p.w_star = x.t().matmul(at::linalg_solve(x.matmul(x.t()), y));
  return p;
}

}  // namespace data
