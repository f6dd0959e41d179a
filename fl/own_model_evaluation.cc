#include "fl/own_model_evaluation.h"

#include <ATen/ATen.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fl/evaluator.h"
#include "fl/local_trainer.h"
#include "fl/personalization.h"
#include "fl/seeding.h"
#include "fl/status_macros.h"

namespace fl {
namespace {

// The clients' training reduced to fine-tuning: K steps of SGD, nothing else.
fedkit::ClientTrainingSpec FineTuningSpec(const OwnModelEvaluation& setup) {
  fedkit::ClientTrainingSpec spec;
  spec.set_steps(setup.fine_tune_steps);
  spec.set_batch_size(setup.client.batch_size());
  spec.set_max_grad_norm(setup.client.max_grad_norm());
  spec.mutable_optimizer()->set_kind(fedkit::OptimizerSpec::SGD);
  spec.mutable_optimizer()->set_lr(setup.fine_tune_learning_rate > 0
                                       ? setup.fine_tune_learning_rate
                                       : setup.client.optimizer().lr());
  return spec;
}

}  // namespace

absl::StatusOr<OwnModelAccuracy> EvaluateOwnModels(Model& model, const ModelState& evaluated,
                                                   const OwnModelEvaluation& setup) {
  const ClientTestSets& sets = *setup.sets;
  ClientStateStore scratch;
  const LocalTrainer fine_tuner(FineTuningSpec(setup), {}, &scratch, setup.augmentation);
  const RoundPlan no_plan;
  OwnModelAccuracy result;
  std::vector<double> per_client;
  per_client.reserve(sets.clients.size());
  std::vector<int64_t> test_sizes;
  test_sizes.reserve(sets.clients.size());
  int64_t offset = 0;
  for (size_t p = 0; p < sets.clients.size(); ++p) {
    const int64_t client = sets.clients[p];
    const at::Tensor indices =
        sets.indices.slice(0, offset, offset + sets.sizes[p]).to(setup.test->x.device());
    offset += sets.sizes[p];
    ModelState own = evaluated;
    if (setup.personal != nullptr) {
      const TensorMap& kept = setup.personal->Committed(client, kPersonalSlot);
      if (!kept.empty()) {
        absl::StatusOr<ModelState> replaced = evaluated.WithReplaced(kept);
        if (!replaced.ok()) {
          return absl::Status(replaced.status().code(),
                              absl::StrCat("client ", client, "'s personal tensors: ",
                                           replaced.status().message()));
        }
        own = *std::move(replaced);
      }
    }
    if (setup.fine_tune_steps > 0) {
      LocalTrainingInput input;
      input.client_id = client;
      input.round = 1;
      input.seed = DeriveSeed(setup.seed, SeedStream::kFineTune, {static_cast<uint64_t>(client)});
      input.global = &own;
      input.plan = &no_plan;
      input.examples = setup.train;
      input.indices = &(*setup.shares)[static_cast<size_t>(client)];
      absl::StatusOr<ClientUpdate> tuned = fine_tuner.Train(model, input);
      if (!tuned.ok()) {
        if (result.fine_tuning_failed++ == 0) result.first_failure = tuned.status();
        continue;
      }
      own = ModelState::FromModule(model);
    }
    const Examples test = {setup.test->x.index_select(0, indices),
                           setup.test->y.index_select(0, indices)};
    FL_ASSIGN_OR_RETURN(Evaluation evaluation,
                        Evaluate(model, own, test, setup.eval_batch_size));
    per_client.push_back(evaluation.accuracy);
    test_sizes.push_back(indices.numel());
  }
  if (per_client.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server.client_evaluation.fine_tune_steps: fine-tuning failed for every client; first: ",
        result.first_failure.message()));
  }
  result.accuracy = SummarizeAccuracies(std::move(per_client), test_sizes);
  return result;
}

}  // namespace fl
