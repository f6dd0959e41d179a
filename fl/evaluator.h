#ifndef FL_EVALUATOR_H_
#define FL_EVALUATOR_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "fl/dataset.h"
#include "fl/model_state.h"

namespace fl {

class Model;

struct Evaluation {
  double accuracy = 0.0;
  double loss = 0.0;  // mean cross-entropy
  int64_t examples = 0;
};

// Loads `state` into `model` and evaluates it on `data` in eval mode, in batches of
// `batch_size` (on the data's device).
absl::StatusOr<Evaluation> Evaluate(Model& model, const ModelState& state, const Examples& data,
                                    int64_t batch_size);

}  // namespace fl

#endif  // FL_EVALUATOR_H_
