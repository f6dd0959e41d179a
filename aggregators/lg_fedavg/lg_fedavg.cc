// LG-FedAvg (Liang, Liu, Ziyin, Allen, Auerbach, Brent, Salakhutdinov &
// Morency, "Think Locally, Act Globally: Federated Learning with Local and Global
// Representations", arXiv 2001.01523, 2020): each client keeps its own
// representation (by default the model's "body", everything below the
// classifier) and the top layers are global, averaged by FedAvg. The paper's
// global part is the top two layers of its networks; with the default groups it
// is the last linear layer, and a model's own groups can say otherwise.
//
// The runner keeps the personal tensors (fl/personalization.h); the plugin
// declares them and hands the shared part to `base` (FedAvg unless named), so it
// composes with any server step that suits a part of a model (FedAdam, FedExP,
// norm_clip, dp_fedavg: docs/personalization.md).
//
//   aggregator {
//     name: "lg_fedavg"
//     options {
//       [type.googleapis.com/fedkit.aggregators.PartialSharingOptions] {
//         # personal_groups: "body"   # the default
//         # base { name: "fedadam" }
//       }
//     }
//   }

#include "aggregators/common/personalized_base.h"
#include "aggregators/common/partial_sharing_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"

namespace aggregators {
namespace {

absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(
    const fedkit::aggregators::PartialSharingOptions& options, const fl::Aggregator::CreateArgs&) {
  return CreatePersonalSharing(options, "lg_fedavg", {"body"});
}

FL_REGISTER_PLUGIN(fl::Aggregator, "lg_fedavg", fedkit::aggregators::PartialSharingOptions, Create);

}  // namespace
}  // namespace aggregators
