// OT fusion (Singh & Jaggi, "Model Fusion via Optimal Transport", NeurIPS 2020)
// as MA-Echo's experiments run it (their do_ot.py over the authors' OTFusion code):
// exact EMD with uniform neuron weights, the Euclidean distance between incoming
// weights as the ground metric, every layer but the last aligned. Each client's
// hidden neurons are matched to the first client's (aggregators/common/
// ot_alignment.h); the aggregate is the split average of the aligned models (the
// classifier averaged per class over the clients holding it, "class_counts" hook).
// MA-Echo's code aligns model 0 to model 1 when there are two clients and every
// other model to model 0 otherwise; here the reference is always the first
// client, which for two clients differs only in which of them keeps its order.
//
// The model must be a chain of linear layers (an MLP); anything else is refused
// at the first update. Keeps every client model until Finalize.
// Distributed runs gather the round's updates to one process (no partial sums).
//
//   server { one_shot: true compare { aggregator { name: "ot_fusion" } } }

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregators/common/class_aware_mean.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/common/ot_alignment.h"
#include "aggregators/ot_fusion/ot_fusion_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

class OtFusion : public fl::Aggregator {
 public:
  explicit OtFusion(int64_t min_class_examples) : min_class_examples_(min_class_examples) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    // A class the only client lacks gets a zero row.
    properties.single_client_identity = false;
    // The first client is the reference the others are matched to.
    properties.order_invariant = false;
    properties.client_hooks = {"class_counts"};
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext&) override {
    FL_ASSIGN_OR_RETURN(classifier_, FindClassifier(global));
    FL_ASSIGN_OR_RETURN(chain_, LinearChain(global));
    layout_ = global;
    models_.clear();
    fl::RoundPlan plan;
    plan.hooks.push_back(ClassCountsRequest());
    return plan;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext&) override {
    FL_RETURN_IF_ERROR(layout_.CheckSameLayout(update.delta));
    FL_ASSIGN_OR_RETURN(at::Tensor held,
                        ClassesHeld(update, classifier_.classes, min_class_examples_));
    models_.push_back({fl::ModelState::Sum(layout_, 1.0, 1.0, update.delta), held});
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext&) override {
    if (models_.empty()) return absl::FailedPreconditionError("no update was accumulated");
    ClassAwareMean mean(classifier_);
    const fl::ModelState& reference = models_.front().first;
    for (auto& [model, held] : models_) {
      const fl::ModelState aligned =
          &model == &reference ? model
                               : PermuteNeurons(model, chain_, AlignNeurons(reference, model, chain_));
      FL_RETURN_IF_ERROR(mean.Add(fl::ModelState::Difference(aligned, global), held));
    }
    models_.clear();
    return mean.StepFrom(global);
  }

 private:
  const int64_t min_class_examples_;
  ClassifierEntries classifier_;
  std::vector<ChainLayer> chain_;
  fl::ModelState layout_;
  std::vector<std::pair<fl::ModelState, at::Tensor>> models_;  // whole model, classes held
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateOtFusion(
    const fedkit::aggregators::OtFusionOptions& options, const fl::Aggregator::CreateArgs&) {
  FL_ASSIGN_OR_RETURN(const int64_t min_examples,
                      ResolveMinClassExamples(options.has_min_class_examples()
                                                  ? std::optional<int32_t>(options.min_class_examples())
                                                  : std::nullopt));
  return std::make_unique<OtFusion>(min_examples);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "ot_fusion", fedkit::aggregators::OtFusionOptions,
                   CreateOtFusion);
FL_CONFORMANCE_REASON("ot_fusion", kNoPartialSums,
                      "every client's neurons are matched to the first client's model before "
                      "averaging: it needs whole models");

}  // namespace
}  // namespace aggregators
