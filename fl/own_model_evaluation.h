#ifndef FL_OWN_MODEL_EVALUATION_H_
#define FL_OWN_MODEL_EVALUATION_H_

// Per-client accuracy with each client's own model, for personalised FL and the
// "FedAvg + FT" baseline: the evaluated model with the client's personal tensors
// (its committed kPersonalSlot in the client state store; the evaluated model's
// own until it has trained), fine-tuned first for K local steps on its training
// share when asked, then evaluated on its label-matched test examples
// (fl/client_evaluation.h). Nothing of it is kept: fine-tuning trains a scratch
// copy, with no hooks and a state store of its own.
//
// Fine-tuning is plain SGD at `fine_tune_learning_rate` with the client's batch
// size, its batches drawn from a stream of (seed, client): the same every time a
// client is evaluated, so a run and its resumed twin agree. A client whose
// fine-tuning fails is left out of the summary and counted, as a client whose
// training fails is left out of a round.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "fl/client_evaluation.h"
#include "fl/client_state_store.h"
#include "fl/dataset.h"
#include "fl/model.h"
#include "fl/model_state.h"
#include "fl/spec.pb.h"

namespace fl {

struct OwnModelEvaluation {
  const ClientTestSets* sets = nullptr;
  const Examples* test = nullptr;
  // The federation's training examples and each client's share of them.
  const Examples* train = nullptr;
  const std::vector<std::vector<int64_t>>* shares = nullptr;
  // The dataset's training augmentation, applied to fine-tuning batches.
  ImageAugmentation augmentation;
  // Committed personal tensors; nullptr when the run has none.
  const ClientStateStore* personal = nullptr;
  // The clients' training (batch size, gradient clipping, learning rate).
  fedkit::ClientTrainingSpec client;
  int fine_tune_steps = 0;
  double fine_tune_learning_rate = 0.0;  // 0: client.optimizer.lr
  uint64_t seed = 0;
  int64_t eval_batch_size = 1;
};

struct OwnModelAccuracy {
  // Over the clients evaluated.
  ClientAccuracy accuracy;
  // Clients whose fine-tuning failed (a BatchNorm layer given a one-example
  // batch, say), left out of `accuracy`, and the first one's error.
  int64_t fine_tuning_failed = 0;
  absl::Status first_failure;
};

// `model`: a replica to work in (its weights and generator are overwritten).
// FailedPrecondition when fine-tuning failed for every client.
absl::StatusOr<OwnModelAccuracy> EvaluateOwnModels(Model& model, const ModelState& evaluated,
                                                   const OwnModelEvaluation& setup);

}  // namespace fl

#endif  // FL_OWN_MODEL_EVALUATION_H_
