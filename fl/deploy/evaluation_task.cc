#include "fl/deploy/evaluation_task.h"

#include <cmath>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace fl::deploy {
namespace {

constexpr char kTestIndices[] = "test_indices";
constexpr char kCorrect[] = "test_correct";
constexpr char kExamples[] = "test_examples";

}  // namespace

ExtraStates EvaluationBroadcast(const std::vector<int64_t>& test_indices) {
  ExtraStates broadcast;
  broadcast[kTestIndices] = ModelState(
      {{"indices", at::tensor(test_indices, at::kLong).view({-1}), /*is_buffer=*/true}});
  return broadcast;
}

absl::StatusOr<std::vector<int64_t>> EvaluationIndices(const ExtraStates& broadcast,
                                                       const std::string& source) {
  const auto it = broadcast.find(kTestIndices);
  if (it == broadcast.end() || it->second.size() != 1 ||
      it->second.entries()[0].tensor.scalar_type() != at::kLong ||
      it->second.entries()[0].tensor.dim() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": an evaluation task carries its test indices as one vector of "
                             "int64 (\"", kTestIndices, "\")"));
  }
  const at::Tensor indices = it->second.entries()[0].tensor.to(at::kCPU).contiguous();
  return std::vector<int64_t>(indices.data_ptr<int64_t>(),
                              indices.data_ptr<int64_t>() + indices.numel());
}

ClientUpdate EvaluationAnswer(int64_t client_id, const OwnEvaluation& result) {
  ClientUpdate answer;
  answer.client_id = client_id;
  answer.metrics[kCorrect] = static_cast<double>(result.correct);
  answer.metrics[kExamples] = static_cast<double>(result.examples);
  return answer;
}

absl::StatusOr<OwnEvaluation> ReadEvaluationAnswer(const ClientUpdate& answer, int64_t client_id,
                                                   const std::string& source) {
  if (answer.client_id != client_id) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the answer says it is client ", answer.client_id, "'s"));
  }
  const auto correct = answer.metrics.find(kCorrect);
  const auto examples = answer.metrics.find(kExamples);
  if (correct == answer.metrics.end() || examples == answer.metrics.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the answer lacks ", kCorrect, " or ", kExamples));
  }
  OwnEvaluation result;
  result.correct = std::llround(correct->second);
  result.examples = std::llround(examples->second);
  if (result.examples < 1 || result.correct < 0 || result.correct > result.examples ||
      static_cast<double>(result.correct) != correct->second ||
      static_cast<double>(result.examples) != examples->second) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", correct->second, " right of ",
                                                   examples->second,
                                                   " test examples is not a count"));
  }
  return result;
}

}  // namespace fl::deploy
