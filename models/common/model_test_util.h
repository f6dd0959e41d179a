#ifndef MODELS_COMMON_MODEL_TEST_UTIL_H_
#define MODELS_COMMON_MODEL_TEST_UTIL_H_

// What every model test checks, in one place: creation through the registry and
// one training step's forward shape and gradients.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "fl/model.h"
#include "google/protobuf/message.h"

namespace models {

// Packs `options` into an Any and creates `name` from fl::Registry<fl::Model>.
absl::StatusOr<std::unique_ptr<fl::Model>> CreateModel(const std::string& name,
                                                       const google::protobuf::Message& options,
                                                       std::vector<int64_t> input_shape,
                                                       int64_t num_classes);

// In train mode: forward `x`, expect {batch, num_classes} logits, backward a
// cross-entropy loss on labels 0, 1, 2, ... (mod num_classes), and expect every
// parameter to have a defined, finite, not-all-zero gradient.
void ExpectTrainStep(fl::Model& model, const at::Tensor& x, int64_t num_classes);

// Names of the model's buffers as fl::ModelState sees them (is_buffer), in order.
std::vector<std::string> BufferNames(const fl::Model& model);

}  // namespace models

#endif  // MODELS_COMMON_MODEL_TEST_UTIL_H_
