#ifndef AGGREGATORS_COMMON_PARTIAL_SHARING_H_
#define AGGREGATORS_COMMON_PARTIAL_SHARING_H_

// The partial-sharing family of personalised FL: each client keeps some of the
// model's parameter groups for itself and shares the rest, which a base
// aggregator (FedAvg by default) aggregates. The runner does the keeping
// (fl/personalization.h): this wrapper only declares the groups
// (AggregatorProperties::personal_groups) and passes everything else to its
// base, which sees only the shared part of the model.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregators/common/partial_sharing_options.pb.h"
#include "fl/aggregator.h"

namespace aggregators {

// `name`: the registered name (for errors); `default_groups`: the method's own
// groups, used when options.personal_groups is empty.
absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreatePartialSharing(
    const fedkit::aggregators::PartialSharingOptions& options, const std::string& name,
    std::vector<std::string> default_groups);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_PARTIAL_SHARING_H_
