#include "aggregators/common/personalized_base.h"

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

class Personalized : public fl::Aggregator {
 public:
  Personalized(std::unique_ptr<fl::Aggregator> base, Personalization shape)
      : base_(std::move(base)), shape_(std::move(shape)) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties = base_->properties();
    auto add = [](const std::vector<std::string>& groups, std::vector<std::string>& to) {
      for (const std::string& group : groups) {
        if (!absl::c_linear_search(to, group)) to.push_back(group);
      }
    };
    add(shape_.personal, properties.personal_groups);
    add(shape_.frozen, properties.frozen_groups);
    properties.local_phases.insert(properties.local_phases.end(), shape_.phases.begin(),
                                   shape_.phases.end());
    properties.personal_model = properties.personal_model || shape_.personal_model;
    properties.own_local_step = properties.own_local_step || shape_.own_local_step;
    if (shape_.hook.has_value()) properties.client_hooks.push_back(shape_.hook->name);
    return properties;
  }
  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(fl::RoundPlan plan, base_->Configure(global, context));
    if (shape_.hook.has_value()) plan.hooks.push_back(*shape_.hook);
    return plan;
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
  const Personalization shape_;
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

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePersonalized(const fedkit::PluginSpec& base,
                                                                   Personalization shape,
                                                                   const std::string& name) {
  fl::ErrorList errors;
  CheckGroups(shape.personal, "personal_groups", errors);
  CheckGroups(shape.frozen, "frozen_groups", errors);
  std::unique_ptr<fl::Aggregator> created = CreateBaseAggregator(base, name, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<Personalized>(std::move(created), std::move(shape));
}

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePersonalizedWithHook(
    const fedkit::PluginSpec& base, Personalization shape, const std::string& name,
    const google::protobuf::Message& hook_options) {
  fl::HookRequest hook;
  hook.name = name;
  hook.options.PackFrom(hook_options);
  shape.hook = std::move(hook);
  return CreatePersonalized(base, std::move(shape), name);
}

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePersonalSharing(
    const fedkit::aggregators::PartialSharingOptions& options, const std::string& name,
    std::vector<std::string> paper_groups) {
  Personalization groups;
  groups.personal.assign(options.personal_groups().begin(), options.personal_groups().end());
  if (groups.personal.empty()) groups.personal = std::move(paper_groups);
  return CreatePersonalized(options.base(), std::move(groups), name);
}

}  // namespace aggregators
