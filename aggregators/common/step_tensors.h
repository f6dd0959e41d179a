#ifndef AGGREGATORS_COMMON_STEP_TENSORS_H_
#define AGGREGATORS_COMMON_STEP_TENSORS_H_

// What a hook that takes the local steps itself (pFedMe, APFL, Per-FedAvg) does
// with the model's tensors: reads the trained parameters and their gradients,
// and sets them to other values in place.

#include <vector>

#include <ATen/core/Tensor.h>

#include "fl/model.h"

namespace aggregators {

// The parameters local training moves (requires_grad), in the model's order:
// the model's own tensors, not copies.
std::vector<at::Tensor> TrainedParameters(fl::Model& model);

// Detached copies.
std::vector<at::Tensor> Values(const std::vector<at::Tensor>& tensors);

// Copies of the parameters' gradients (zeros where a parameter has none).
std::vector<at::Tensor> Gradients(const std::vector<at::Tensor>& parameters);

// parameters[i] <- values[i], in place, outside autograd.
void Assign(const std::vector<at::Tensor>& parameters, const std::vector<at::Tensor>& values);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_STEP_TENSORS_H_
