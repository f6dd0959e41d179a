#ifndef FL_DEPLOY_EVALUATION_TASK_H_
#define FL_DEPLOY_EVALUATION_TASK_H_

// An evaluation task's payload and answer (deploy.proto, Task.evaluation), in the
// framing of a training task's: the plan broadcasts the client's test indices,
// and the answer is a ClientUpdate with no delta whose metrics say how many of
// how many test examples the client's own model got right.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fl/client.h"
#include "fl/client_update.h"
#include "fl/model_state.h"

namespace fl::deploy {

// The plan's broadcast for an evaluation on `test_indices`.
ExtraStates EvaluationBroadcast(const std::vector<int64_t>& test_indices);
// The test indices of an evaluation task's broadcast. Errors name `source`: no
// indices, or not a vector of integers.
absl::StatusOr<std::vector<int64_t>> EvaluationIndices(const ExtraStates& broadcast,
                                                       const std::string& source);

ClientUpdate EvaluationAnswer(int64_t client_id, const OwnEvaluation& result);
// The count in client `client_id`'s answer. Errors name `source`: another
// client's answer, counts missing, or not 0 <= correct <= examples, examples >= 1.
absl::StatusOr<OwnEvaluation> ReadEvaluationAnswer(const ClientUpdate& answer, int64_t client_id,
                                                   const std::string& source);

}  // namespace fl::deploy

#endif  // FL_DEPLOY_EVALUATION_TASK_H_
