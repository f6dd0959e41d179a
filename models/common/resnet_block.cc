#include "models/common/resnet_block.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/normalization.h>

namespace models {

using torch::nn::Conv2dOptions;

torch::nn::AnyModule MakeNorm(int64_t channels, const NormSpec& norm) {
  if (norm.kind == NormSpec::Kind::kGroupNorm) {
    return torch::nn::AnyModule(
        torch::nn::GroupNorm(torch::nn::GroupNormOptions(norm.groups, channels)));
  }
  return torch::nn::AnyModule(torch::nn::BatchNorm2d(channels));
}

BasicBlock::BasicBlock(int64_t in_planes, int64_t planes, int64_t stride,
                               const NormSpec& norm, Shortcut shortcut)
    : stride_(stride) {
  conv1_ = register_module(
      "conv1",
      torch::nn::Conv2d(Conv2dOptions(in_planes, planes, 3).stride(stride).padding(1).bias(false)));
  bn1_ = MakeNorm(planes, norm);
  register_module("bn1", bn1_.ptr());
  conv2_ = register_module(
      "conv2", torch::nn::Conv2d(Conv2dOptions(planes, planes, 3).padding(1).bias(false)));
  bn2_ = MakeNorm(planes, norm);
  register_module("bn2", bn2_.ptr());
  if (stride == 1 && in_planes == planes) return;
  if (shortcut == Shortcut::kProjection) {
    projection_ = torch::nn::Sequential(
        torch::nn::Conv2d(Conv2dOptions(in_planes, planes, 1).stride(stride).bias(false)));
    projection_->push_back(MakeNorm(planes, norm));
    register_module("shortcut", projection_);
  } else {
    pad_channels_ = (planes - in_planes) / 2;
  }
}

at::Tensor BasicBlock::forward(const at::Tensor& x) {
  at::Tensor out = at::relu(bn1_.forward(conv1_->forward(x)));
  out = bn2_.forward(conv2_->forward(out));
  if (!projection_.is_empty()) {
    out += projection_->forward(x);
  } else if (stride_ != 1 || pad_channels_ != 0) {
    at::Tensor sub = x.slice(2, 0, c10::nullopt, stride_).slice(3, 0, c10::nullopt, stride_);
    out += at::constant_pad_nd(sub, {0, 0, 0, 0, pad_channels_, pad_channels_});
  } else {
    out += x;
  }
  return at::relu(out);
}

}  // namespace models
