// Ditto (Li, Hu, Beirami & Smith, "Ditto: Fair and Robust Federated Learning
// Through Personalization", ICML 2021, Algorithm 1): the global model w is
// trained as the base aggregator trains it (FedAvg in the paper); beside it each
// selected client k trains a personal model v_k for s steps of SGD on
//   F_k(v) + (lambda / 2) ||v - w_t||^2
// (Eq. 2), w_t the round's global model, from its own v_k (the global model the
// first time). Clients are evaluated with their v_k.
//
// Two plugins: the aggregator "ditto" (its base's server step; it declares a
// personal model and plans the hook) and the client hook "ditto", which trains
// v_k after the global model's local training, on the same examples, with the
// same batch size, as a second LocalTrainer run whose loss adds the proximal
// term. v_k lives in the client state store (kPersonalSlot): it survives
// checkpoints, never leaves the client and is not counted in bytes_up. The
// global model's training is exactly the base's: v_k does not touch it.
//
//   aggregator {
//     name: "ditto"
//     options {
//       [type.googleapis.com/fedkit.aggregators.DittoOptions] {
//         personal { lambda: 0.1 }   # personal_steps 0: as many as local training
//         # base { name: "median" }
//       }
//     }
//   }

#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "aggregators/common/personalized_base.h"
#include "aggregators/common/proximal_term.h"
#include "aggregators/ditto/ditto_options.pb.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/client_state_store.h"
#include "fl/errors.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

constexpr char kName[] = "ditto";
constexpr double kDefaultLambda = 0.1;

class DittoHook : public fl::ClientHook {
 public:
  explicit DittoHook(fedkit::aggregators::DittoHookOptions options)
      : options_(std::move(options)) {}

  // The personal model is evaluated only when the aggregator declares it.
  bool planned_only() const override { return true; }

  absl::Status AfterTraining(fl::HookContext& context, fl::ClientUpdate& update) override {
    // v_k, or the global model (the trainer's default start) the first time.
    fl::ModelState start;
    if (!context.personal->empty()) {
      absl::StatusOr<fl::ModelState> own = context.global->WithReplaced(*context.personal);
      if (!own.ok()) {
        return absl::Status(own.status().code(),
                            absl::StrCat("its personal model: ", own.status().message()));
      }
      start = *std::move(own);
    }
    fedkit::ClientTrainingSpec spec;
    spec.set_steps(options_.personal_steps() > 0 ? options_.personal_steps()
                                                 : update.local_steps);
    spec.set_batch_size(context.batch_size);
    spec.mutable_optimizer()->set_kind(fedkit::OptimizerSpec::SGD);
    spec.mutable_optimizer()->set_lr(options_.personal_learning_rate() > 0
                                         ? options_.personal_learning_rate()
                                         : context.learning_rate);
    fl::ClientStateStore scratch;
    const fl::LocalTrainer trainer(spec, {}, &scratch, context.augmentation);
    ProximalTerm proximal(options_.has_lambda() ? options_.lambda() : kDefaultLambda);
    const fl::RoundPlan no_plan;
    fl::LocalTrainingInput input;
    input.client_id = context.client_id;
    input.round = context.round;
    input.seed = context.seed;
    input.global = context.global;
    if (!start.empty()) input.start = &start;
    input.plan = &no_plan;
    input.examples = context.examples;
    input.indices = context.train_indices;
    input.caller_hook = &proximal;
    // Hooks after this one see the replica as local training left it.
    const fl::ModelState local = fl::ModelState::FromModule(*context.model);
    absl::StatusOr<fl::ClientUpdate> trained = trainer.Train(*context.model, input);
    if (!trained.ok()) {
      return absl::Status(trained.status().code(),
                          absl::StrCat("its personal model: ", trained.status().message()));
    }
    *context.personal = fl::ModelState::FromModule(*context.model).TensorsByName();
    return local.LoadInto(*context.model);
  }

 private:
  const fedkit::aggregators::DittoHookOptions options_;
};

void CheckHookOptions(const fedkit::aggregators::DittoHookOptions& options,
                      const std::string& prefix, fl::ErrorList& errors) {
  if (options.has_lambda() && !(options.lambda() >= 0 && std::isfinite(options.lambda()))) {
    errors.Add(prefix + "lambda", absl::StrCat("must be >= 0, got ", options.lambda()));
  }
  if (options.personal_steps() < 0) {
    errors.Add(prefix + "personal_steps",
               absl::StrCat("must be >= 0, got ", options.personal_steps()));
  }
  if (!(options.personal_learning_rate() >= 0 &&
        std::isfinite(options.personal_learning_rate()))) {
    errors.Add(prefix + "personal_learning_rate",
               absl::StrCat("must be >= 0, got ", options.personal_learning_rate()));
  }
}

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateHook(
    const fedkit::aggregators::DittoHookOptions& options, const fl::ClientHook::CreateArgs&) {
  fl::ErrorList errors;
  CheckHookOptions(options, "options.", errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<DittoHook>(options);
}

FL_REGISTER_PLUGIN(fl::ClientHook, kName, fedkit::aggregators::DittoHookOptions, CreateHook);

absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(
    const fedkit::aggregators::DittoOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  CheckHookOptions(options.personal(), "options.personal.", errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  Personalization shape;
  shape.personal_model = true;
  return CreatePersonalizedWithHook(options.base(), std::move(shape), kName, options.personal());
}

FL_REGISTER_PLUGIN(fl::Aggregator, kName, fedkit::aggregators::DittoOptions, Create);

}  // namespace
}  // namespace aggregators
