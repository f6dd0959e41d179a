#ifndef FL_FLAT_PARAMETERS_H_
#define FL_FLAT_PARAMETERS_H_

// LibTorch 1.13's optimisers loop over parameter tensors, a few kernel launches
// each; a small model (an MLP's six tensors) spends as long in them as in its own
// forward pass. Laying the parameters, and their gradients, out as views of one
// buffer each lets an optimiser update them all as one tensor, with the same
// arithmetic element by element.

#include <vector>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace fl {

class FlatParameters {
 public:
  enum class Layout {
    // Parameters and gradients as views of one buffer each.
    kOneBuffer,
    // The parameters as they are: for an optimiser of one kernel per tensor (plain
    // SGD), where one buffer saves nothing and copying the gradients in costs.
    kPerTensor,
  };

  // With kOneBuffer, makes `module`'s trainable parameters and their gradients views
  // into one contiguous buffer each, values unchanged; a module already laid out so
  // (by an earlier FlatParameters) is only adopted. Parameters of mixed dtypes or
  // devices are left as they are.
  explicit FlatParameters(torch::nn::Module& module, Layout layout = Layout::kOneBuffer);

  // What an optimiser should update: the one flat tensor, whose grad() is the flat
  // gradient, or the parameters themselves.
  const std::vector<at::Tensor>& optimizer_tensors() const { return optimizer_tensors_; }

  // Drops the parameters' gradients before a backward pass, so that autograd hands
  // its result over rather than adding it into zeros (a memset and an addition over
  // every gradient: 3 % of a quickstart step's instructions). The flat gradient stays: an
  // optimiser skips a tensor without one. Not an optimiser's zero_grad(), which in
  // LibTorch 1.13 zeroes and in 2.x drops the flat gradient too.
  void ClearGradients();

  // After each backward pass: puts every parameter's new gradient in its place in
  // the flat buffer and makes it a view there again, and gives a parameter the
  // pass left without a gradient zeros, as zeroing before the pass would have (an
  // optimiser would skip it, weight decay and momentum included).
  void RelinkGradients();

 private:
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> gradient_views_;  // empty when not flattened
  std::vector<at::Tensor> optimizer_tensors_;
};

}  // namespace fl

#endif  // FL_FLAT_PARAMETERS_H_
