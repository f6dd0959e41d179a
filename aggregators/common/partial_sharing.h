#ifndef AGGREGATORS_COMMON_PARTIAL_SHARING_H_
#define AGGREGATORS_COMMON_PARTIAL_SHARING_H_

// The partial-sharing family of personalised FL: each client keeps some of the
// model's parameter groups for itself (FedPer, LG-FedAvg, FedBN), or nobody
// trains some (FedBABU's head), and a base aggregator (FedAvg by default)
// aggregates the rest. The runner does the keeping (fl/personalization.h): this
// wrapper only declares the groups (AggregatorProperties::personal_groups,
// frozen_groups) and passes everything else to its base, which sees only the
// shared part of the model.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregators/common/partial_sharing_options.pb.h"
#include "fl/aggregator.h"
#include "fl/spec.pb.h"

namespace aggregators {

struct SharingGroups {
  std::vector<std::string> personal;
  std::vector<std::string> frozen;
};

// A `base` aggregator (FedAvg when unnamed) whose clients keep `groups.personal`
// and never train `groups.frozen`. `name`: the registered name (for errors).
// InvalidArgument naming the option (options.personal_groups[i] or
// options.frozen_groups[i]) for an empty or repeated group, and options.base's
// errors.
absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePartialSharing(const fedkit::PluginSpec& base,
                                                                     SharingGroups groups,
                                                                     const std::string& name);

// fedper, lg_fedavg, fedbn: options.personal_groups, or `paper_groups` when empty.
absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePersonalSharing(
    const fedkit::aggregators::PartialSharingOptions& options, const std::string& name,
    std::vector<std::string> paper_groups);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_PARTIAL_SHARING_H_
