#ifndef FL_MODEL_H_
#define FL_MODEL_H_

// A model plugin builds a fresh, randomly initialised network from its options and
// the dataset's shape. The framework builds as many instances as it needs (the
// global model, one replica per worker, a server-side copy for proxy-set methods),
// so factories must be cheap and side-effect free.

#include <cstdint>
#include <vector>

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
};

}  // namespace fl

#endif  // FL_MODEL_H_
