#include "fl/personalization.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fl/model_state.h"
#include "fl/status_macros.h"

namespace fl {

absl::StatusOr<std::vector<std::string>> GroupTensors(const Model& model,
                                                      const std::vector<std::string>& groups) {
  const std::map<std::string, std::vector<std::string>> known = model.ParameterGroups();
  std::set<std::string> chosen;
  for (const std::string& group : groups) {
    auto it = known.find(group);
    if (it == known.end()) {
      std::vector<std::string> names;
      for (const auto& [name, tensors] : known) names.push_back(name);
      return absl::InvalidArgumentError(
          absl::StrCat("the model has no parameter group \"", group, "\"; it has ",
                       absl::StrJoin(names, ", ")));
    }
    chosen.insert(it->second.begin(), it->second.end());
  }
  std::vector<std::string> ordered;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (chosen.count(item.key()) != 0) ordered.push_back(item.key());
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    if (chosen.count(item.key()) != 0) ordered.push_back(item.key());
  }
  return ordered;
}

absl::StatusOr<UnsharedTensors> ResolveUnshared(const Model& model,
                                                const AggregatorProperties& properties) {
  UnsharedTensors unshared;
  auto resolve = [&](const std::vector<std::string>& groups, const char* option,
                     std::vector<std::string>& tensors) -> absl::Status {
    absl::StatusOr<std::vector<std::string>> resolved = GroupTensors(model, groups);
    if (!resolved.ok()) {
      return absl::Status(resolved.status().code(),
                          absl::StrCat("aggregator.options.", option, ": ",
                                       resolved.status().message()));
    }
    tensors = *std::move(resolved);
    return absl::OkStatus();
  };
  FL_RETURN_IF_ERROR(resolve(properties.personal_groups, "personal_groups", unshared.personal));
  FL_RETURN_IF_ERROR(resolve(properties.frozen_groups, "frozen_groups", unshared.frozen));
  const std::set<std::string> personal(unshared.personal.begin(), unshared.personal.end());
  std::set<std::string> all = personal;
  for (const std::string& name : unshared.frozen) {
    if (personal.count(name) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "aggregator.options.frozen_groups: \"", name,
          "\" is also in a personal group; a tensor is personal or frozen, not both"));
    }
    all.insert(name);
  }
  if (all.empty()) return unshared;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (all.count(item.key()) == 0) return unshared;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "aggregator.options: personal groups (", absl::StrJoin(properties.personal_groups, ", "),
      ") and frozen groups (", absl::StrJoin(properties.frozen_groups, ", "),
      ") cover every parameter of the model: nothing would be shared"));
}

void ValidatePersonalization(const fedkit::ExperimentSpec& spec,
                             const AggregatorProperties& properties, ErrorList& errors) {
  const bool unshared = !properties.personal_groups.empty() || !properties.frozen_groups.empty();
  for (size_t i = 0; i < properties.local_phases.size(); ++i) {
    const LocalPhase& phase = properties.local_phases[i];
    if (phase.epochs < 0) {
      errors.Add("aggregator.options",
                 absl::StrCat("local training phase ", i, ": epochs must be >= 0, got ",
                              phase.epochs));
    }
    if (phase.part == LocalPhase::Part::kPersonal && properties.personal_groups.empty()) {
      errors.Add("aggregator.options",
                 absl::StrCat("local training phase ", i,
                              " trains the personal part, but no parameter group is personal"));
    }
  }
  if (properties.local_phases.size() > 1 && spec.client().keep_optimizer_state()) {
    errors.Add("client.keep_optimizer_state",
               "the aggregator trains locally in phases, each with an optimiser of its own; "
               "there is no one optimiser state to keep");
  }
  if (properties.own_local_step) {
    const fedkit::ClientTrainingSpec& client = spec.client();
    const std::string why =
        "the aggregator's client hook takes the local steps itself, as plain SGD at "
        "client.optimizer.lr";
    if (client.optimizer().kind() != fedkit::OptimizerSpec::SGD) {
      errors.Add("client.optimizer.kind", why);
    }
    if (client.optimizer().momentum() != 0) errors.Add("client.optimizer.momentum", why);
    if (client.optimizer().weight_decay() != 0) {
      errors.Add("client.optimizer.weight_decay", why);
    }
    if (client.keep_optimizer_state()) errors.Add("client.keep_optimizer_state", why);
    if (!properties.local_phases.empty()) {
      errors.Add("aggregator.options", why + ", in one phase");
    }
  }
  if (properties.personal_model && unshared) {
    errors.Add("aggregator.options.base",
               absl::StrCat("a personal model (the whole model, kept by each client) does not "
                            "compose with personal or frozen parameter groups (",
                            absl::StrJoin(properties.personal_groups, ", "),
                            properties.personal_groups.empty() || properties.frozen_groups.empty()
                                ? ""
                                : "; ",
                            absl::StrJoin(properties.frozen_groups, ", "), ")"));
  }
  if (!unshared && !properties.personal_model) return;
  std::vector<std::string> kept;
  if (!properties.personal_groups.empty()) {
    kept.push_back(absl::StrCat("keep ", absl::StrJoin(properties.personal_groups, ", "),
                                " to themselves"));
  }
  if (!properties.frozen_groups.empty()) {
    kept.push_back(absl::StrCat("never train ", absl::StrJoin(properties.frozen_groups, ", ")));
  }
  if (properties.personal_model) kept.push_back("keep a personal model to themselves");
  const std::string why = absl::StrCat("the aggregator's clients ", absl::StrJoin(kept, " and "),
                                       ", out of what the server sees, and ");
  const fedkit::ServerSpec& server = spec.server();
  if (server.one_shot()) {
    errors.Add("server.one_shot", why + "a one-shot round compares whole client models");
  }
  if (!unshared) return;
  if (server.download().kind() != fedkit::CodecSpec::IDENTITY) {
    errors.Add("server.download",
               why + "a compressed download tracks the clients' copy of the whole model");
  }
  if (properties.uses_proxy) {
    errors.Add("server.proxy",
               why + "an aggregator that runs the model on the server's proxy set would run it "
                     "without them");
  }
}

}  // namespace fl
