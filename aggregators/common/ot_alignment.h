#ifndef AGGREGATORS_COMMON_OT_ALIGNMENT_H_
#define AGGREGATORS_COMMON_OT_ALIGNMENT_H_

// The neuron alignment of OT fusion (Singh & Jaggi, "Model Fusion via Optimal
// Transport", NeurIPS 2020), as MA-Echo's experiments use it: one model's hidden
// neurons are matched to a reference model's, layer by layer in forward order, by
// exact earth mover's distance with uniform weights on the Euclidean distances
// between the neurons' incoming weights (and bias), after the model's inputs to that
// layer were reordered by the previous layer's match. With equal widths and uniform
// weights the optimal plan is a permutation, found exactly by LEMON's network
// simplex. The last layer's outputs (the classes) are never permuted. Not a plugin:
// the ot_fusion and maecho plugins share it.

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "fl/model_state.h"

namespace aggregators {

// One linear layer of a chain: each layer's input width is the previous one's
// output width.
struct ChainLayer {
  size_t weight = 0;
  std::optional<size_t> bias;
};

// The model's 2-D parameters in order, with the vector after each that fits it as
// its bias. Fails (naming the parameter) unless they form a chain of linear layers.
absl::StatusOr<std::vector<ChainLayer>> LinearChain(const fl::ModelState& layout);

// The assignment of minimal total cost for a square cost matrix ({n, n}): match[c]
// is the row assigned to column c. Exact (network simplex on the bipartite graph).
std::vector<int64_t> MinCostAssignment(const at::Tensor& cost);

// For every layer but the last, a long tensor `match`: the model's neuron match[r]
// takes the place of the reference's neuron r.
std::vector<at::Tensor> AlignNeurons(const fl::ModelState& reference, const fl::ModelState& model,
                                     const std::vector<ChainLayer>& chain);

// `model` with its hidden neurons reordered by `matches` (AlignNeurons): the rows
// (and bias) of layer l and the input columns of layer l + 1. The function the
// model computes does not change.
fl::ModelState PermuteNeurons(const fl::ModelState& model, const std::vector<ChainLayer>& chain,
                              const std::vector<at::Tensor>& matches);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_OT_ALIGNMENT_H_
