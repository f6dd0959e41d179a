#ifndef FL_MODEL_H_
#define FL_MODEL_H_

// A model plugin builds a fresh, randomly initialised network from its options and
// the dataset's shape. The framework builds as many instances as it needs (the
// global model, one replica per worker, a server-side copy for proxy-set methods),
// so factories must be cheap and side-effect free.

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include "absl/status/statusor.h"

namespace fl {

class Model : public torch::nn::Module {
 public:
  static constexpr char kRegistryKind[] = "model";
  struct CreateArgs {
    std::vector<int64_t> input_shape;  // of one example
    int64_t num_classes = 0;
  };

  // Logits for a batch `x` of shape {batch, input_shape...}.
  virtual at::Tensor Forward(const at::Tensor& x) = 0;

  // What one weight layer receives, for methods that work in a layer's input space
  // (MA-Echo's projection matrices).
  struct LayerInput {
    std::string weight;  // the layer's weight, by its ModelState name
    std::string bias;    // its bias by name; empty for a bias-free layer
    // {batch, in_features} for a linear layer; {batch, C, H, W} for a 2-D
    // convolution, before its padding.
    at::Tensor input;
    std::vector<int64_t> kernel;  // {kh, kw} of a convolution; empty for a linear layer
  };

  // Runs the model on `x` (in whatever mode it is in) and returns the input of every
  // linear and convolutional layer, in forward order. The default: Unimplemented,
  // for models that do not expose their layers.
  virtual absl::StatusOr<std::vector<LayerInput>> LayerInputs(const at::Tensor& x);

  // Named groups of the model's tensors (parameters and buffers, by their
  // ModelState names), for methods that share only some of them with the server
  // (personalised FL: FedPer keeps the head, LG-FedAvg the body, FedBN the
  // normalisation layers). The default, from the module tree: "head", the last
  // linear layer (the classifier); "body", every tensor not in the head; "norm",
  // the tensors of BatchNorm, GroupNorm, LayerNorm and InstanceNorm layers. A
  // model whose classifier is not its last linear layer overrides this.
  virtual std::map<std::string, std::vector<std::string>> ParameterGroups() const;

  // The random stream of the model's stochastic layers. Worker threads share
  // LibTorch's global generator, so the trainer gives each (client, round) its
  // own, which keeps results independent of which worker trains whom. Undefined
  // (the default): the global generator.
  void set_generator(at::Generator generator) { generator_ = std::move(generator); }
  const at::Generator& generator() const { return generator_; }

 protected:
  // Inverted dropout (zero with probability p, scale the rest by 1 / (1 - p)) in
  // training mode, drawing from generator(); the identity in evaluation mode.
  // Models use this rather than at::dropout, which draws from the global generator.
  at::Tensor Dropout(const at::Tensor& x, double p) const;

 private:
  at::Generator generator_;
};

}  // namespace fl

#endif  // FL_MODEL_H_
