#include "fl/evaluator.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "fl/model.h"
#include "fl/status_macros.h"

namespace fl {

absl::StatusOr<Evaluation> Evaluate(Model& model, const ModelState& state, const Examples& data,
                                    int64_t batch_size) {
  FL_RETURN_IF_ERROR(state.LoadInto(model));
  model.eval();
  return EvaluatePredictor([&model](const at::Tensor& x) { return model.Forward(x); }, data,
                           batch_size);
}

absl::StatusOr<Evaluation> EvaluatePredictor(const Predictor& predict, const Examples& data,
                                             int64_t batch_size) {
  if (data.size() == 0) return absl::InvalidArgumentError("evaluation set is empty");
  try {
    at::NoGradGuard no_grad;
    // Accumulated on the device and read once, so that no batch waits for the host.
    at::Tensor loss_sum = at::zeros({}, data.x.options().dtype(at::kDouble));
    at::Tensor correct = at::empty({data.size()}, data.y.options().dtype(at::kBool));
    for (int64_t begin = 0; begin < data.size(); begin += batch_size) {
      const int64_t n = std::min(batch_size, data.size() - begin);
      const at::Tensor logits = predict(data.x.narrow(0, begin, n));
      const at::Tensor y = data.y.narrow(0, begin, n);
      loss_sum.add_(at::cross_entropy_loss(logits, y, {}, at::Reduction::Sum));
      correct.narrow(0, begin, n).copy_(logits.argmax(1).eq(y));
    }
    Evaluation evaluation;
    evaluation.accuracy = static_cast<double>(correct.sum().item<int64_t>()) / data.size();
    evaluation.loss = loss_sum.item<double>() / data.size();
    evaluation.examples = data.size();
    evaluation.correct = std::move(correct);
    return evaluation;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("evaluation: ", e.what_without_backtrace()));
  }
}

}  // namespace fl
