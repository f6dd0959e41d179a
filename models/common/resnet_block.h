#ifndef MODELS_COMMON_RESNET_BLOCK_H_
#define MODELS_COMMON_RESNET_BLOCK_H_

// The residual "basic block" (two 3x3 convolutions, He et al., CVPR 2016) shared by
// the ResNet plugins, with the normalisation layer and the shortcut as choices, so
// that a parameter is named as in the PyTorch reference code (layer1.0.conv1.weight,
// layer1.0.bn1.running_mean, layer2.0.shortcut.0.weight).

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>

namespace models {

struct NormSpec {
  enum class Kind { kBatchNorm, kGroupNorm };
  Kind kind = Kind::kBatchNorm;
  int64_t groups = 2;  // kGroupNorm only; must divide every channel count
};

// BatchNorm2d (running statistics registered as buffers) or GroupNorm over `channels`.
torch::nn::AnyModule MakeNorm(int64_t channels, const NormSpec& norm);

enum class Shortcut {
  // He et al.'s option A for CIFAR: subsample by the stride, zero-pad the new channels.
  // No parameters.
  kIdentityPad,
  // Option B: 1x1 convolution with the stride, then a norm layer, where the shape
  // changes (the torchvision / kuangliu / FedLAW / FedExP code).
  kProjection,
};

class BasicBlock : public torch::nn::Module {
 public:
  BasicBlock(int64_t in_planes, int64_t planes, int64_t stride, const NormSpec& norm,
                 Shortcut shortcut);
  // Named `forward` so torch::nn::Sequential can hold it.
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  torch::nn::AnyModule bn1_, bn2_;
  // Empty for an identity shortcut.
  torch::nn::Sequential projection_{nullptr};
  int64_t stride_ = 1;
  int64_t pad_channels_ = 0;  // kIdentityPad: zero channels added on each side
};

}  // namespace models

#endif  // MODELS_COMMON_RESNET_BLOCK_H_
