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
  // Makes `module`'s trainable parameters and their gradients views into one
  // contiguous buffer each, values unchanged; a module already laid out so (by an
  // earlier FlatParameters) is only adopted. Parameters of mixed dtypes or devices
  // are left as they are.
  explicit FlatParameters(torch::nn::Module& module);

  // What an optimiser should update: the one flat tensor, whose grad() is the flat
  // gradient (or the parameters themselves when they could not be flattened).
  const std::vector<at::Tensor>& optimizer_tensors() const { return optimizer_tensors_; }

  // Autograd replaces a gradient rather than accumulating into it when it builds a
  // graph of the gradient (create_graph); this copies any such gradient back into
  // its place in the flat buffer. Call after each backward pass.
  void RelinkGradients();

  // Sets the gradients to zero in place, before each backward pass. An optimiser's
  // own zero_grad() must not be used: LibTorch 2.x's drops the flat gradient (its
  // set_to_none defaults to true), so the optimiser would skip the buffer and the
  // parameters' views would keep accumulating.
  void ZeroGradients();

 private:
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> gradient_views_;  // empty when not flattened
  std::vector<at::Tensor> optimizer_tensors_;
};

}  // namespace fl

#endif  // FL_FLAT_PARAMETERS_H_
