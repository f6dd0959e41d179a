#include "fl/personalization.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fl/model_state.h"

namespace fl {

absl::StatusOr<std::vector<std::string>> PersonalTensors(const Model& model,
                                                         const std::vector<std::string>& groups) {
  const std::map<std::string, std::vector<std::string>> known = model.ParameterGroups();
  std::set<std::string> personal;
  for (const std::string& group : groups) {
    auto it = known.find(group);
    if (it == known.end()) {
      std::vector<std::string> names;
      for (const auto& [name, tensors] : known) names.push_back(name);
      return absl::InvalidArgumentError(
          absl::StrCat("the model has no parameter group \"", group, "\"; it has ",
                       absl::StrJoin(names, ", ")));
    }
    personal.insert(it->second.begin(), it->second.end());
  }
  std::vector<std::string> ordered;
  bool shares_a_parameter = false;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (personal.count(item.key()) != 0) {
      ordered.push_back(item.key());
    } else {
      shares_a_parameter = true;
    }
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    if (personal.count(item.key()) != 0) ordered.push_back(item.key());
  }
  if (!ordered.empty() && !shares_a_parameter) {
    return absl::InvalidArgumentError(absl::StrCat(
        "personal groups ", absl::StrJoin(groups, ", "),
        " cover every parameter of the model: nothing would be shared"));
  }
  return ordered;
}

void ValidatePersonalization(const fedkit::ExperimentSpec& spec,
                             const AggregatorProperties& properties, ErrorList& errors) {
  if (properties.personal_groups.empty()) return;
  const std::string why =
      absl::StrCat("the aggregator's clients keep parameter groups to themselves (",
                   absl::StrJoin(properties.personal_groups, ", "), "), and ");
  const fedkit::ServerSpec& server = spec.server();
  if (server.has_async()) {
    errors.Add("server.async", why + "the asynchronous loop does not keep them yet");
  }
  if (server.one_shot()) {
    errors.Add("server.one_shot", why + "a one-shot round has no later round to use them in");
  }
  if (spec.simulation().backend() == fedkit::SimulationSpec::C10D) {
    errors.Add("simulation.backend",
               why + "C10D keeps each client's on its owning rank, where the server cannot "
                     "evaluate the client's own model yet");
  }
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
