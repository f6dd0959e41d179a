// The class-masked logit ensemble, MA-Echo's upper-reference baseline for one-shot
// FL (the official code's ensemble test): for an input, every client model's
// logits are computed, each client's logits of the classes it does not hold are
// zeroed, the rest summed, and each class's sum divided by the number of clients
// holding that class (0 when none does). Classes held come from the "class_counts"
// hook, which this aggregator plans.
//
// The ensemble is not one weight vector: Finalize lends the server the predictor
// (ServerContext::evaluation_predictor), which the round's evaluation and the
// one-shot report run on the test set, and returns the split average of the same
// models as the model training would continue from (and the one saved). Wrapped by
// a method that needs weights (elastic), only that returned model remains.
//
// Memory: every client model is kept for the predictor, N model replicas.
// Distributed runs gather the round's updates to one process (no partial sums).
//
//   server { one_shot: true compare { aggregator { name: "ensemble" } } }

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/class_aware_mean.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/ensemble/ensemble_options.pb.h"
#include "fl/aggregator.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

class Ensemble : public fl::Aggregator {
 public:
  explicit Ensemble(int64_t min_class_examples) : min_class_examples_(min_class_examples) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    // The returned model is the split average: a class the only client lacks gets
    // a zero row.
    properties.single_client_identity = false;
    properties.client_hooks = {"class_counts"};
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext&) override {
    FL_ASSIGN_OR_RETURN(ClassifierEntries classifier, FindClassifier(global));
    mean_.emplace(classifier);
    members_ = std::make_shared<Members>();
    fl::RoundPlan plan;
    plan.hooks.push_back(ClassCountsRequest());
    return plan;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    if (!mean_.has_value()) return absl::FailedPreconditionError("Accumulate before Configure");
    FL_ASSIGN_OR_RETURN(at::Tensor held,
                        ClassesHeld(update, mean_->classifier().classes, min_class_examples_));
    FL_RETURN_IF_ERROR(mean_->Add(update.delta, held));
    pending_.push_back({std::move(update.delta), held});
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    if (!mean_.has_value() || pending_.empty()) {
      return absl::FailedPreconditionError("no update was accumulated");
    }
    at::Tensor holders;
    for (auto& [delta, held] : pending_) {
      FL_ASSIGN_OR_RETURN(std::unique_ptr<fl::Model> model, context.new_model());
      FL_RETURN_IF_ERROR(fl::ModelState::Sum(global, 1.0, 1.0, delta).LoadInto(*model));
      model->eval();
      const at::Tensor mask = held.to(context.device, at::kFloat);
      members_->models.push_back(std::move(model));
      members_->masks.push_back(mask);
      holders = holders.defined() ? holders + mask : mask.clone();
    }
    members_->divisor = holders.clamp_min(1);
    pending_.clear();
    context.evaluation_predictor = [members = members_](const at::Tensor& inputs) {
      at::Tensor sum;
      for (size_t i = 0; i < members->models.size(); ++i) {
        const at::Tensor logits = members->models[i]->Forward(inputs) * members->masks[i];
        sum = sum.defined() ? sum + logits : logits;
      }
      return sum / members->divisor;
    };
    return mean_->StepFrom(global);
  }

 private:
  // What the predictor holds, shared with it so that it outlives the round.
  struct Members {
    std::vector<std::unique_ptr<fl::Model>> models;
    std::vector<at::Tensor> masks;  // classes held, as 0/1 per logit
    at::Tensor divisor;             // holders per class, at least 1
  };

  const int64_t min_class_examples_;
  std::optional<ClassAwareMean> mean_;
  std::vector<std::pair<fl::ModelState, at::Tensor>> pending_;  // delta, classes held
  std::shared_ptr<Members> members_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateEnsemble(
    const fedkit::aggregators::EnsembleOptions& options, const fl::Aggregator::CreateArgs&) {
  FL_ASSIGN_OR_RETURN(const int64_t min_examples,
                      ResolveMinClassExamples(options.has_min_class_examples()
                                                  ? std::optional<int32_t>(options.min_class_examples())
                                                  : std::nullopt));
  return std::make_unique<Ensemble>(min_examples);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "ensemble", fedkit::aggregators::EnsembleOptions,
                   CreateEnsemble);
FL_CONFORMANCE_REASON("ensemble", kNoPartialSums,
                      "the predictor it lends keeps every client model (the class-masked "
                      "logit ensemble)");

}  // namespace
}  // namespace aggregators
