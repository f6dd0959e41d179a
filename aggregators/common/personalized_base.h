#ifndef AGGREGATORS_COMMON_PERSONALIZED_BASE_H_
#define AGGREGATORS_COMMON_PERSONALIZED_BASE_H_

// Personalised FL methods whose server half is another aggregator's: each client
// keeps some of the model's parameter groups for itself (FedPer, LG-FedAvg,
// FedBN, FedRep), or nobody trains some (FedBABU's head), or each client keeps a
// whole model of its own that a client hook trains (Ditto). A base aggregator
// (FedAvg by default) aggregates the shared part. The runner does the keeping
// (fl/personalization.h): this wrapper declares the shape (AggregatorProperties::
// personal_groups, frozen_groups, local_phases, personal_model), plans the hook
// and passes everything else to its base, which sees only the shared part.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregators/common/partial_sharing_options.pb.h"
#include "fl/aggregator.h"
#include "fl/spec.pb.h"
#include "google/protobuf/message.h"

namespace aggregators {

struct Personalization {
  std::vector<std::string> personal;
  std::vector<std::string> frozen;
  std::vector<fl::LocalPhase> phases;
  bool personal_model = false;
  // The hook takes the local steps itself (AggregatorProperties::own_local_step).
  bool own_local_step = false;
  // Planned for every client, after the base's hooks.
  std::optional<fl::HookRequest> hook;
};

// A `base` aggregator (FedAvg when unnamed) with `shape`. `name`: the registered
// name (for errors). InvalidArgument naming the option (options.personal_groups[i]
// or options.frozen_groups[i]) for an empty or repeated group, and options.base's
// errors.
absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePersonalized(const fedkit::PluginSpec& base,
                                                                   Personalization shape,
                                                                   const std::string& name);

// `base` with `shape`, planning for every client the hook registered under the
// same `name` as the aggregator, with `hook_options` (Ditto, pFedMe, APFL,
// Per-FedAvg: an aggregator and its client half).
absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePersonalizedWithHook(
    const fedkit::PluginSpec& base, Personalization shape, const std::string& name,
    const google::protobuf::Message& hook_options);

// fedper, lg_fedavg, fedbn: options.personal_groups, or `paper_groups` when empty.
absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePersonalSharing(
    const fedkit::aggregators::PartialSharingOptions& options, const std::string& name,
    std::vector<std::string> paper_groups);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_PERSONALIZED_BASE_H_
