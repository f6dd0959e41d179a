#include "aggregators/common/step_tensors.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace aggregators {

std::vector<at::Tensor> TrainedParameters(fl::Model& model) {
  std::vector<at::Tensor> trained;
  for (const at::Tensor& p : model.parameters()) {
    if (p.requires_grad()) trained.push_back(p);
  }
  return trained;
}

std::vector<at::Tensor> Values(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> values;
  values.reserve(tensors.size());
  for (const at::Tensor& t : tensors) values.push_back(t.detach().clone());
  return values;
}

std::vector<at::Tensor> Gradients(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> gradients;
  gradients.reserve(parameters.size());
  for (const at::Tensor& p : parameters) {
    gradients.push_back(p.grad().defined() ? p.grad().detach().clone() : at::zeros_like(p));
  }
  return gradients;
}

void Assign(const std::vector<at::Tensor>& parameters, const std::vector<at::Tensor>& values) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters.size(); ++i) {
    at::Tensor p = parameters[i];
    p.copy_(values[i]);
  }
}

}  // namespace aggregators
