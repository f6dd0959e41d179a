#include "aggregators/common/partial_sharing.h"

#include <map>
#include <optional>
#include <utility>

#include <ATen/core/Tensor.h>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "aggregators/common/base_aggregator.h"
#include "fl/errors.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

class PartialSharing : public fl::Aggregator {
 public:
  PartialSharing(std::unique_ptr<fl::Aggregator> base, std::vector<std::string> personal_groups)
      : base_(std::move(base)), personal_groups_(std::move(personal_groups)) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties = base_->properties();
    for (const std::string& group : personal_groups_) {
      if (absl::c_linear_search(properties.personal_groups, group)) continue;
      properties.personal_groups.push_back(group);
    }
    return properties;
  }
  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    return base_->Configure(global, context);
  }
  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    return base_->Accumulate(std::move(update), context);
  }
  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    return base_->Finalize(global, context);
  }
  std::optional<std::map<std::string, at::Tensor>> PartialSums() const override {
    return base_->PartialSums();
  }
  absl::Status MergePartialSums(std::map<std::string, at::Tensor> sums) override {
    return base_->MergePartialSums(std::move(sums));
  }
  std::map<std::string, at::Tensor> SaveState() const override { return base_->SaveState(); }
  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state) override {
    return base_->RestoreState(state);
  }

 private:
  std::unique_ptr<fl::Aggregator> base_;
  const std::vector<std::string> personal_groups_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePartialSharing(
    const fedkit::aggregators::PartialSharingOptions& options, const std::string& name,
    std::vector<std::string> default_groups) {
  fl::ErrorList errors;
  std::vector<std::string> groups(options.personal_groups().begin(),
                                  options.personal_groups().end());
  if (groups.empty()) groups = std::move(default_groups);
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].empty()) {
      errors.Add(absl::StrCat("options.personal_groups[", i, "]"), "must not be empty");
    }
    for (size_t j = 0; j < i; ++j) {
      if (groups[j] == groups[i]) {
        errors.Add(absl::StrCat("options.personal_groups[", i, "]"),
                   absl::StrCat("\"", groups[i], "\" is also personal_groups[", j, "]"));
      }
    }
  }
  std::unique_ptr<fl::Aggregator> base = CreateBaseAggregator(options.base(), name, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<PartialSharing>(std::move(base), std::move(groups));
}

}  // namespace aggregators
