#include "aggregators/fedlaw/fedlaw_weights.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace aggregators::fedlaw {

at::Tensor FlattenParameters(const fl::ModelState& state) {
  std::vector<at::Tensor> parts;
  for (const auto& e : state.entries()) {
    if (!e.is_buffer) parts.push_back(e.tensor.reshape(-1));
  }
  return at::cat(parts);
}

double Weights::Gamma() const {
  return parameterization == Parameterization::kExp ? std::exp(g) : g * g;
}

std::vector<double> Weights::Lambda() const {
  std::vector<double> lambda(a.size());
  if (parameterization == Parameterization::kExp) {
    const double top = *std::max_element(a.begin(), a.end());
    double sum = 0.0;
    for (size_t i = 0; i < a.size(); ++i) sum += lambda[i] = std::exp(a[i] - top);
    for (double& l : lambda) l /= sum;
  } else {
    double sum = 0.0;
    for (size_t i = 0; i < a.size(); ++i) sum += lambda[i] = a[i] * a[i];
    for (double& l : lambda) l /= sum;
  }
  return lambda;
}

Weights InitialWeights(Parameterization parameterization, const std::vector<double>& size_weights,
                       bool lambda_from_sizes) {
  Weights w;
  w.parameterization = parameterization;
  const auto n = static_cast<double>(size_weights.size());
  for (double s : size_weights) {
    if (parameterization == Parameterization::kExp) {
      w.a.push_back(std::log(s));
    } else {
      w.a.push_back(lambda_from_sizes ? std::sqrt(s) : std::sqrt(1.0 / n));
    }
  }
  w.g = parameterization == Parameterization::kExp ? 0.0 : 1.0;
  return w;
}

at::Tensor Combine(const Cohort& cohort, double gamma, const std::vector<double>& lambda) {
  const at::Tensor l = at::tensor(lambda, at::kDouble)
                           .to(cohort.deltas.device(), cohort.deltas.scalar_type());
  return at::addmv(cohort.base, cohort.deltas.t(), l).mul_(gamma);
}

Gradient ChainRule(const Weights& weights, const Cohort& cohort, const at::Tensor& gradient) {
  const std::vector<double> lambda = weights.Lambda();
  const double gamma = weights.Gamma();
  // e_i = <G, delta_i>; d_i = <G, base> + e_i.
  const at::Tensor e_tensor = at::mv(cohort.deltas, gradient).to(at::kCPU, at::kDouble);
  const double* e = e_tensor.data_ptr<double>();
  const double c = at::dot(cohort.base, gradient).item<double>();
  double mean_e = 0.0;
  for (size_t i = 0; i < lambda.size(); ++i) mean_e += lambda[i] * e[i];
  const double big_d = c + mean_e;  // dL/dgamma

  Gradient out;
  out.a.resize(lambda.size());
  if (weights.parameterization == Parameterization::kExp) {
    out.g = gamma * big_d;
    for (size_t j = 0; j < lambda.size(); ++j) out.a[j] = gamma * lambda[j] * (e[j] - mean_e);
  } else {
    double sum_sq = 0.0;
    for (double a : weights.a) sum_sq += a * a;
    out.g = 2.0 * weights.g * big_d;
    for (size_t j = 0; j < lambda.size(); ++j) {
      out.a[j] = gamma * (2.0 * weights.a[j] / sum_sq) * (e[j] - mean_e);
    }
  }
  return out;
}

void LoadParameters(const at::Tensor& theta, const std::vector<at::Tensor>& parameters) {
  at::NoGradGuard no_grad;
  int64_t offset = 0;
  for (const at::Tensor& p : parameters) {
    const int64_t n = p.numel();
    p.copy_(theta.narrow(0, offset, n).view(p.sizes()));
    offset += n;
  }
}

double LossAndGradient(fl::Model& model, const std::vector<at::Tensor>& parameters,
                       const at::Tensor& theta, const at::Tensor& x, const at::Tensor& y,
                       at::Tensor* gradient) {
  LoadParameters(theta, parameters);
  const at::Tensor loss = at::cross_entropy_loss(model.Forward(x), y);
  loss.backward();
  std::vector<at::Tensor> parts;
  for (const at::Tensor& p : parameters) {
    parts.push_back(p.grad().defined() ? p.grad().reshape(-1) : at::zeros({p.numel()}, p.options()));
  }
  *gradient = at::cat(parts);
  for (const at::Tensor& p : parameters) p.mutable_grad() = at::Tensor();
  return loss.item<double>();
}

void ScalarAdam::Step(std::vector<double>& x, const std::vector<double>& grad, double lr) {
  ++t_;
  const double correction1 = 1.0 - std::pow(beta1_, static_cast<double>(t_));
  const double correction2_sqrt = std::sqrt(1.0 - std::pow(beta2_, static_cast<double>(t_)));
  for (size_t i = 0; i < x.size(); ++i) {
    m_[i] = beta1_ * m_[i] + (1.0 - beta1_) * grad[i];
    v_[i] = beta2_ * v_[i] + (1.0 - beta2_) * grad[i] * grad[i];
    x[i] -= (lr / correction1) * m_[i] / (std::sqrt(v_[i]) / correction2_sqrt + eps_);
  }
}

double StepLr(double lr, int epoch) { return lr * std::pow(0.5, epoch / 20); }

double SwaLambdaLr(double lr, int epoch) {
  constexpr double kPi = 3.14159265358979323846;
  constexpr double kTMax = 100.0;
  constexpr double kAnnealEpochs = 10.0;
  auto cosine = [&](int e) { return lr * (1.0 + std::cos(kPi * e / kTMax)) / 2.0; };
  if (epoch <= kSwaStart + 1) return cosine(epoch);
  const double t = std::min(1.0, (epoch - kSwaStart - 1) / kAnnealEpochs);
  const double alpha = (1.0 - std::cos(kPi * t)) / 2.0;
  return kSwaLr * alpha + cosine(kSwaStart + 1) * (1.0 - alpha);
}

}  // namespace aggregators::fedlaw
