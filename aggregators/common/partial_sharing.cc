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
  PartialSharing(std::unique_ptr<fl::Aggregator> base, SharingGroups groups)
      : base_(std::move(base)), groups_(std::move(groups)) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties = base_->properties();
    auto add = [](const std::vector<std::string>& groups, std::vector<std::string>& to) {
      for (const std::string& group : groups) {
        if (!absl::c_linear_search(to, group)) to.push_back(group);
      }
    };
    add(groups_.personal, properties.personal_groups);
    add(groups_.frozen, properties.frozen_groups);
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
  const SharingGroups groups_;
};

void CheckGroups(const std::vector<std::string>& groups, const std::string& option,
                 fl::ErrorList& errors) {
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string path = absl::StrCat("options.", option, "[", i, "]");
    if (groups[i].empty()) errors.Add(path, "must not be empty");
    for (size_t j = 0; j < i; ++j) {
      if (groups[j] == groups[i]) {
        errors.Add(path, absl::StrCat("\"", groups[i], "\" is also ", option, "[", j, "]"));
      }
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePartialSharing(const fedkit::PluginSpec& base,
                                                                     SharingGroups groups,
                                                                     const std::string& name) {
  fl::ErrorList errors;
  CheckGroups(groups.personal, "personal_groups", errors);
  CheckGroups(groups.frozen, "frozen_groups", errors);
  std::unique_ptr<fl::Aggregator> created = CreateBaseAggregator(base, name, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<PartialSharing>(std::move(created), std::move(groups));
}

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePersonalSharing(
    const fedkit::aggregators::PartialSharingOptions& options, const std::string& name,
    std::vector<std::string> paper_groups) {
  SharingGroups groups;
  groups.personal.assign(options.personal_groups().begin(), options.personal_groups().end());
  if (groups.personal.empty()) groups.personal = std::move(paper_groups);
  return CreatePartialSharing(options.base(), std::move(groups), name);
}

}  // namespace aggregators
