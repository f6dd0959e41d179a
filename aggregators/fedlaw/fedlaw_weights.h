#ifndef AGGREGATORS_FEDLAW_FEDLAW_WEIGHTS_H_
#define AGGREGATORS_FEDLAW_FEDLAW_WEIGHTS_H_

// The arithmetic of FedLAW's server optimisation (Li et al., ICML 2023, Eq. 8 under
// the official code's parameterisations), kept apart from the plugin so tests can
// reach it: the combined model theta_hat = gamma * sum_i lambda_i theta_i, the
// gradient of the proxy loss with respect to (a, g) from one backward pass at
// theta_hat, PyTorch's Adam on those few scalars, and the code's learning-rate
// schedules. Not a plugin; only aggregators/fedlaw uses it.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "fl/model.h"
#include "fl/model_state.h"

namespace aggregators::fedlaw {

enum class Parameterization {
  kExp,   // gamma = exp(g), lambda = softmax(a)
  kQuad,  // gamma = g^2, lambda_i = a_i^2 / sum_j a_j^2
};

// The round's client models over the model's parameters, flattened in the order of
// the model's parameters: theta_i = base + deltas[i].
struct Cohort {
  at::Tensor base;    // [P]
  at::Tensor deltas;  // [N, P]
};

// The parameters of a ModelState (buffers skipped), flattened into one [P] tensor.
at::Tensor FlattenParameters(const fl::ModelState& state);

// What the server optimises: one a_i per client and g.
struct Weights {
  Parameterization parameterization = Parameterization::kExp;
  std::vector<double> a;
  double g = 0.0;

  double Gamma() const;
  std::vector<double> Lambda() const;
};

// The official code's starting point (server_funct.py): exp: a_i = log w_i, g = 0
// (FedAvg's weights, gamma = 1); quad: a_i = sqrt(1 / N) (uniform lambda), g = 1.
// With lambda_from_sizes (lambda held at the size weights), quad starts at
// a_i = sqrt(w_i) so that lambda = w there too. `size_weights` sum to 1.
Weights InitialWeights(Parameterization parameterization, const std::vector<double>& size_weights,
                       bool lambda_from_sizes);

// gamma * (base + sum_i lambda_i deltas_i), which is gamma * sum_i lambda_i theta_i
// because the lambdas sum to 1 (the delta form keeps the large base out of the sum).
at::Tensor Combine(const Cohort& cohort, double gamma, const std::vector<double>& lambda);

struct Gradient {
  std::vector<double> a;
  double g = 0.0;
};

// dL/d(a, g) from G = dL/dtheta_hat ([P]), by the chain rule through
// theta_hat = gamma sum_i lambda_i theta_i: with d_i = <G, theta_i> and
// D = sum_i lambda_i d_i (= dL/dgamma),
//   exp:  dL/dg = gamma D,   dL/da_j = gamma lambda_j (d_j - D)
//   quad: dL/dg = 2 g D,     dL/da_j = gamma (2 a_j / sum_k a_k^2) (d_j - D)
// N + 1 dot products; d_j - D is taken over the deltas alone (the base cancels).
Gradient ChainRule(const Weights& weights, const Cohort& cohort, const at::Tensor& gradient);

// Copies the flat `theta` into `parameters` (the model's, in order), runs one
// forward and backward pass of the mean cross-entropy on (x, y) in the model's
// current mode, sets *gradient to dL/dtheta flattened ([P]) and returns the loss.
// The parameters' .grad are cleared afterwards.
double LossAndGradient(fl::Model& model, const std::vector<at::Tensor>& parameters,
                       const at::Tensor& theta, const at::Tensor& x, const at::Tensor& y,
                       at::Tensor* gradient);

// Copies the flat `theta` into `parameters`, without recording gradients.
void LoadParameters(const at::Tensor& theta, const std::vector<at::Tensor>& parameters);

// torch.optim.Adam (no weight decay, no amsgrad) on a vector of scalars:
//   m = b1 m + (1 - b1) grad;  v = b2 v + (1 - b2) grad^2
//   x -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
class ScalarAdam {
 public:
  ScalarAdam(size_t size, double beta1, double beta2, double eps)
      : beta1_(beta1), beta2_(beta2), eps_(eps), m_(size, 0.0), v_(size, 0.0) {}
  void Step(std::vector<double>& x, const std::vector<double>& grad, double lr);

 private:
  double beta1_, beta2_, eps_;
  std::vector<double> m_, v_;
  int64_t t_ = 0;
};

// StepLR(step_size 20, gamma 0.5), stepped once per server epoch (0-based `epoch`).
double StepLr(double lr, int epoch);

// The SWA variant's lambda-stage schedule (server_funct.py L141-271): cosine
// annealing (T_max 100) through epoch kSwaStart + 1, then SWALR annealing towards
// kSwaLr over 10 epochs (cosine), starting from the rate in force at that point.
inline constexpr int kSwaStart = 5;  // a snapshot of a is taken after every epoch > this
inline constexpr double kSwaLr = 0.05;
double SwaLambdaLr(double lr, int epoch);

}  // namespace aggregators::fedlaw

#endif  // AGGREGATORS_FEDLAW_FEDLAW_WEIGHTS_H_
