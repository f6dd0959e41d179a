#include "fl/flat_parameters.h"

#include <cstdint>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

namespace fl {
namespace {

// A 1-D tensor over `base`'s whole storage.
at::Tensor WholeStorage(const at::Tensor& base, int64_t numel) {
  return at::empty({0}, base.options()).set_(base.storage(), 0, {numel}, {1});
}

// Whether `tensors` already lie back to back, in order, from the start of the
// first one's storage, which they fill.
bool LaidOutFlat(const std::vector<at::Tensor>& tensors, int64_t numel) {
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.is_contiguous() || !t.storage().is_alias_of(tensors[0].storage()) ||
        t.storage_offset() != offset) {
      return false;
    }
    offset += t.numel();
  }
  return offset == numel &&
         tensors[0].storage().nbytes() == static_cast<size_t>(numel) * tensors[0].itemsize();
}

}  // namespace

FlatParameters::FlatParameters(torch::nn::Module& module, Layout layout) {
  for (const at::Tensor& p : module.parameters()) {
    if (p.requires_grad()) parameters_.push_back(p);
  }
  optimizer_tensors_ = parameters_;
  if (parameters_.empty() || layout == Layout::kPerTensor) return;
  int64_t numel = 0;
  for (const at::Tensor& p : parameters_) {
    if (p.scalar_type() != parameters_[0].scalar_type() ||
        p.device() != parameters_[0].device()) {
      return;
    }
    numel += p.numel();
  }

  at::NoGradGuard no_grad;
  std::vector<at::Tensor> gradients;
  for (const at::Tensor& p : parameters_) gradients.push_back(p.grad());
  at::Tensor flat;
  at::Tensor flat_gradient;
  if (LaidOutFlat(parameters_, numel) && LaidOutFlat(gradients, numel)) {
    flat = WholeStorage(parameters_[0], numel);
    flat_gradient = WholeStorage(gradients[0], numel);
    gradient_views_ = std::move(gradients);
  } else {
    flat = at::empty({numel}, parameters_[0].options());
    flat_gradient = at::zeros({numel}, parameters_[0].options());
    int64_t offset = 0;
    for (at::Tensor& p : parameters_) {
      const int64_t n = p.numel();
      at::Tensor view = flat.narrow(0, offset, n).view(p.sizes());
      view.copy_(p);
      p.set_data(view);
      at::Tensor gradient_view = flat_gradient.narrow(0, offset, n).view(p.sizes());
      if (p.grad().defined()) gradient_view.copy_(p.grad());
      p.mutable_grad() = gradient_view;
      gradient_views_.push_back(gradient_view);
      offset += n;
    }
  }
  flat.mutable_grad() = flat_gradient;
  optimizer_tensors_ = {flat};
}

void FlatParameters::ClearGradients() {
  for (at::Tensor& p : parameters_) p.mutable_grad().reset();
}

void FlatParameters::RelinkGradients() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor& gradient = parameters_[i].mutable_grad();
    if (gradient_views_.empty()) {
      if (!gradient.defined()) gradient = at::zeros_like(parameters_[i]);
      continue;
    }
    if (gradient.defined() && gradient.is_same(gradient_views_[i])) continue;
    if (gradient.defined()) {
      gradient_views_[i].copy_(gradient);
    } else {
      gradient_views_[i].zero_();
    }
    gradient = gradient_views_[i];
  }
}

}  // namespace fl
