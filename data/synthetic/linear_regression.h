#ifndef DATA_SYNTHETIC_LINEAR_REGRESSION_H_
#define DATA_SYNTHETIC_LINEAR_REGRESSION_H_

// FedExP's over-parameterised linear regression (Jhunjhunwala et al., ICLR 2023,
// Section 6 / Figure 3; the official code's linear_regression.ipynb;
// docs/fedexp.md, section 4.2): client i holds X_i (samples x dims) and y_i, every
// row of X_i and each y_i scaled to unit L2 norm, objective
// f_i(w) = 1/2 ||X_i w - y_i||^2. With clients * samples < dims the stacked system
// is under-determined and consistent, and gradient methods started at w = 0
// converge to its minimum-norm solution w*.
//
// Example:
//   const data::LinearRegressionProblem p = data::MakeLinearRegression({});
//   // p.x.size() == 20, p.x[0].sizes() == {30, 1000}, p.w_star.sizes() == {1000}

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace data {

struct LinearRegressionConfig {
  int64_t dims = 1000;              // d; the paper's 1000
  int64_t clients = 20;             // the paper's 20
  int64_t samples_per_client = 30;  // rows of each X_i; the paper's 30
  uint64_t seed = 1;
};

struct LinearRegressionProblem {
  std::vector<at::Tensor> x;  // per client: samples x dims, float64, unit-norm rows
  std::vector<at::Tensor> y;  // per client: samples, float64, unit norm
  at::Tensor w_star;          // dims, float64: X^T (X X^T)^{-1} y of the stacked system
};

// REQUIRES: every field >= 1 and clients * samples_per_client <= dims (else X X^T is
// singular). Seeds LibTorch's global CPU generator with config.seed (at::manual_seed)
// and draws X_1, y_1, X_2, y_2, ... from it with at::randn, so the same seed gives
// the same problem.
LinearRegressionProblem MakeLinearRegression(const LinearRegressionConfig& config);

}  // namespace data

#endif  // DATA_SYNTHETIC_LINEAR_REGRESSION_H_
