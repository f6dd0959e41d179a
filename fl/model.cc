#include "fl/model.h"

#include <algorithm>

#include <ATen/ATen.h>

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/functional/instancenorm.h>
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "absl/status/status.h"

namespace fl {

at::Tensor Model::Dropout(const at::Tensor& x, double p) const {
  if (!is_training() || p == 0.0) return x;
  if (p >= 1.0) return at::zeros_like(x);
  c10::optional<at::Generator> generator;
  if (generator_.defined()) generator = generator_;
  const at::Tensor keep = at::empty_like(x).bernoulli_(1.0 - p, generator);
  return x * keep.div_(1.0 - p);
}

absl::StatusOr<std::vector<Model::LayerInput>> Model::LayerInputs(const at::Tensor&) {
  return absl::UnimplementedError(
      "the model does not expose its layers' inputs (fl::Model::LayerInputs)");
}

namespace {

bool IsNormalization(const torch::nn::Module& module) {
  return module.as<torch::nn::BatchNorm1d>() != nullptr ||
         module.as<torch::nn::BatchNorm2d>() != nullptr ||
         module.as<torch::nn::BatchNorm3d>() != nullptr ||
         module.as<torch::nn::GroupNorm>() != nullptr ||
         module.as<torch::nn::LayerNorm>() != nullptr ||
         module.as<torch::nn::InstanceNorm1d>() != nullptr ||
         module.as<torch::nn::InstanceNorm2d>() != nullptr ||
         module.as<torch::nn::InstanceNorm3d>() != nullptr;
}

// The module's own tensors (not its children's), by their names in the whole model.
std::vector<std::string> OwnTensors(const std::string& prefix, const torch::nn::Module& module) {
  std::vector<std::string> names;
  const std::string dot = prefix.empty() ? "" : prefix + ".";
  for (const auto& item : module.named_parameters(/*recurse=*/false)) names.push_back(dot + item.key());
  for (const auto& item : module.named_buffers(/*recurse=*/false)) names.push_back(dot + item.key());
  return names;
}

}  // namespace

std::map<std::string, std::vector<std::string>> Model::ParameterGroups() const {
  std::vector<std::string> head;
  std::vector<std::string> norm;
  for (const auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (item.value()->as<torch::nn::Linear>() != nullptr) head = OwnTensors(item.key(), *item.value());
    if (IsNormalization(*item.value())) {
      for (std::string& name : OwnTensors(item.key(), *item.value())) norm.push_back(std::move(name));
    }
  }
  std::map<std::string, std::vector<std::string>> groups;
  std::vector<std::string>& body = groups["body"];
  auto add_unless_head = [&](const std::string& name) {
    if (std::find(head.begin(), head.end(), name) == head.end()) body.push_back(name);
  };
  for (const auto& item : named_parameters(/*recurse=*/true)) add_unless_head(item.key());
  for (const auto& item : named_buffers(/*recurse=*/true)) add_unless_head(item.key());
  if (!head.empty()) groups["head"] = std::move(head);
  if (!norm.empty()) groups["norm"] = std::move(norm);
  return groups;
}

}  // namespace fl
