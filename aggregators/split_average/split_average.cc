// The "split average", MA-Echo's FedAvg baseline for one-shot FL under label skew
// (Su, Li, Xue, "One-shot Federated Learning without Server-side Training"; the
// official code's noniid_avgmodel): every tensor is the UNIFORM mean of the
// clients' models (not weighted by data size), except the classifier, whose row
// for class c (and bias entry) is the mean over only the clients that hold c. A
// class no client holds gets a zero row, as in the code. The classifier is the
// model's last parameter of 2 or more dimensions; the client's classes come from
// the "class_counts" hook, which this aggregator plans.
//
// Streaming: O(P) memory whatever the number of clients; the sums and per-class
// holder counts are all-reduced in distributed runs. Used in multi-round FL it is
// this same average of the round's cohort.
//
//   aggregator { name: "split_average" }
//   server { one_shot: true compare { aggregator { name: "split_average" } } }

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "aggregators/common/class_aware_mean.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/split_average/split_average_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {
namespace {

class SplitAverage : public fl::Aggregator {
 public:
  explicit SplitAverage(int64_t min_class_examples) : min_class_examples_(min_class_examples) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    // A class the only client lacks gets a zero row.
    properties.single_client_identity = false;
    properties.client_hooks = {"class_counts"};
    properties.sums_only = true;
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext&) override {
    FL_ASSIGN_OR_RETURN(ClassifierEntries classifier, FindClassifier(global));
    mean_.emplace(classifier);
    global_ = global;
    fl::RoundPlan plan;
    plan.hooks.push_back(ClassCountsRequest());
    return plan;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext&) override {
    if (!mean_.has_value()) return absl::FailedPreconditionError("Accumulate before Configure");
    FL_ASSIGN_OR_RETURN(at::Tensor held,
                        ClassesHeld(update, classes(), min_class_examples_));
    return mean_->Add(update.delta, held);
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext&) override {
    if (!mean_.has_value()) return absl::FailedPreconditionError("Finalize before Configure");
    global_.reset();
    return mean_->StepFrom(global);
  }

  std::optional<NamedSums> PartialSums() const override {
    CHECK(global_.has_value()) << "PartialSums before Configure";
    NamedSums sums;
    mean_->AddPartialSums("", *global_, sums);
    return sums;
  }

  absl::Status MergePartialSums(NamedSums sums) override {
    FL_RETURN_IF_ERROR(CheckMergeable(*this, global_.has_value(), sums));
    mean_->MergePartialSums("", *global_, sums);
    return absl::OkStatus();
  }

 private:
  int64_t classes() const { return mean_->classifier().classes; }

  const int64_t min_class_examples_;
  std::optional<ClassAwareMean> mean_;
  // This round's global model (sharing the server's storage): the layout of the
  // partial sums of a process that accumulated nothing.
  std::optional<fl::ModelState> global_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateSplitAverage(
    const fedkit::aggregators::SplitAverageOptions& options, const fl::Aggregator::CreateArgs&) {
  FL_ASSIGN_OR_RETURN(const int64_t min_examples,
                      ResolveMinClassExamples(options.has_min_class_examples()
                                                  ? std::optional<int32_t>(options.min_class_examples())
                                                  : std::nullopt));
  return std::make_unique<SplitAverage>(min_examples);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "split_average", fedkit::aggregators::SplitAverageOptions,
                   CreateSplitAverage);

}  // namespace
}  // namespace aggregators
