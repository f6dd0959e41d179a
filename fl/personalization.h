#ifndef FL_PERSONALIZATION_H_
#define FL_PERSONALIZATION_H_

// Personalised FL's shape in a run: which of the model's tensors each client
// keeps for itself and which nobody trains (the aggregator's personal_groups and
// frozen_groups, resolved against the model's parameter groups), and which spec
// combinations cannot keep them out of what the server sees.
//
// The runner does the rest: the local trainer restores a client's personal
// tensors from the client state store before training and stores them again
// after it, leaving them out of the update; the server lends its aggregator the
// model without them; per-client evaluation assembles each client's own model.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/spec.pb.h"

namespace fl {

// The client state store's slot for a client's personal tensors ('@' cannot
// start a plugin name).
inline constexpr char kPersonalSlot[] = "@personal";

// The tensors of `groups` (Model::ParameterGroups), in the model's ModelState
// order. InvalidArgument naming the model's groups when a group is unknown.
absl::StatusOr<std::vector<std::string>> GroupTensors(const Model& model,
                                                      const std::vector<std::string>& groups);

// The aggregator's personal and frozen tensors, each checked: InvalidArgument,
// with the option's path, for an unknown group, a tensor both personal and
// frozen, or when together they cover every parameter (nothing would be
// aggregated).
struct UnsharedTensors {
  std::vector<std::string> personal;
  std::vector<std::string> frozen;
};
absl::StatusOr<UnsharedTensors> ResolveUnshared(const Model& model,
                                                const AggregatorProperties& properties);

// What a run with personal or frozen tensors, or a personal model, cannot do
// yet, each an error at the field that asks for it: one-shot rounds,
// asynchronous rounds with unshared tensors, a lossy download
// and a proxy-set aggregator with unshared tensors (the clients' copy of the
// model, and the proxy's, would be the whole model). Also the aggregator's own
// shape: local phases that train a personal part it lacks, an optimiser state
// kept across phases, and a personal model over personal or frozen groups (both
// would live in kPersonalSlot).
void ValidatePersonalization(const fedkit::ExperimentSpec& spec,
                             const AggregatorProperties& properties, ErrorList& errors);

}  // namespace fl

#endif  // FL_PERSONALIZATION_H_
