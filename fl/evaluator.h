#ifndef FL_EVALUATOR_H_
#define FL_EVALUATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "fl/dataset.h"
#include "fl/model_state.h"

namespace fl {

class Model;

// Logits for a batch of inputs.
using Predictor = std::function<at::Tensor(const at::Tensor& inputs)>;

struct Evaluation {
  double accuracy = 0.0;
  double loss = 0.0;  // mean cross-entropy
  int64_t examples = 0;
  at::Tensor correct;  // per example, in order: whether the prediction was right (bool)
  // Per-client accuracy columns (fl/client_evaluation.h), when the run has them.
  std::map<std::string, double> client_accuracy;
};

// Loads `state` into `model` and evaluates it on `data` in eval mode, in batches of
// `batch_size` (on the data's device).
absl::StatusOr<Evaluation> Evaluate(Model& model, const ModelState& state, const Examples& data,
                                    int64_t batch_size);

// Evaluates a predictor (logits for a batch of inputs) that is not one model's
// weights, such as a logit ensemble, the same way.
absl::StatusOr<Evaluation> EvaluatePredictor(const Predictor& predict, const Examples& data,
                                             int64_t batch_size);

}  // namespace fl

#endif  // FL_EVALUATOR_H_
