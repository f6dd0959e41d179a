#include "fl/evaluator.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "fl/model.h"
#include "fl/status_macros.h"

namespace fl {

absl::StatusOr<Evaluation> Evaluate(Model& model, const ModelState& state, const Examples& data,
                                    int64_t batch_size) {
  if (data.size() == 0) return absl::InvalidArgumentError("evaluation set is empty");
  FL_RETURN_IF_ERROR(state.LoadInto(model));
  try {
    at::NoGradGuard no_grad;
    model.eval();
    double loss_sum = 0.0;
    int64_t correct = 0;
    for (int64_t begin = 0; begin < data.size(); begin += batch_size) {
      const int64_t n = std::min(batch_size, data.size() - begin);
      const at::Tensor logits = model.Forward(data.x.narrow(0, begin, n));
      const at::Tensor y = data.y.narrow(0, begin, n);
      loss_sum += at::cross_entropy_loss(logits, y, {}, at::Reduction::Sum).item<double>();
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
    }
    return Evaluation{static_cast<double>(correct) / data.size(), loss_sum / data.size(),
                      data.size()};
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("evaluation: ", e.what_without_backtrace()));
  }
}

}  // namespace fl
