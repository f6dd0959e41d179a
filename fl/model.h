#ifndef FL_MODEL_H_
#define FL_MODEL_H_

// A model plugin builds a fresh, randomly initialised network from its options and
// the dataset's shape. The framework builds as many instances as it needs (the
// global model, one replica per worker, a server-side copy for proxy-set methods),
// so factories must be cheap and side-effect free.

#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

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
