// FedPer (Arivazhagan, Aggarwal, Singh & Choudhary, "Federated Learning with
// Personalization Layers", arXiv 1912.00818, 2019): the base layers are shared
// and averaged by FedAvg; the personalization layers (by default the model's
// "head", its classifier) stay on each client. Each client trains the whole
// model every round, from the global base and its own head; it sends only the
// base's delta, and is evaluated with its own head.
//
// The runner keeps the personal tensors (fl/personalization.h); the plugin
// declares them and hands the shared part to `base` (FedAvg unless named), so it
// composes with any server step that suits a part of a model (FedAdam, FedExP,
// norm_clip, dp_fedavg: docs/personalization.md).
//
//   aggregator {
//     name: "fedper"
//     options {
//       [type.googleapis.com/fedkit.aggregators.PartialSharingOptions] {
//         # personal_groups: "head"   # the default
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
  return CreatePersonalSharing(options, "fedper", {"head"});
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedper", fedkit::aggregators::PartialSharingOptions, Create);

}  // namespace
}  // namespace aggregators
