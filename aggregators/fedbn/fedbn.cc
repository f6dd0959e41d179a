// FedBN (Li, Jiang, Zhang, Kamp & Dou, "FedBN: Federated Learning on Non-IID
// Features via Local Batch Normalization", ICLR 2021, Algorithm 1): every
// normalisation layer's parameters and running statistics (the model's "norm"
// group) stay on each client; all other parameters are averaged by FedAvg. A
// model without normalisation layers is refused (it has no "norm" group); `mlp`
// has them with batch_norm: true.
//
// The runner keeps the personal tensors (fl/personalization.h); the plugin
// declares them and hands the shared part to `base` (FedAvg unless named), so it
// composes with any server step that suits a part of a model (FedAdam, FedExP,
// norm_clip, dp_fedavg: docs/personalization.md).
//
//   aggregator {
//     name: "fedbn"
//     options {
//       [type.googleapis.com/fedkit.aggregators.PartialSharingOptions] {
//         # personal_groups: "norm"   # the default
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
  return CreatePersonalSharing(options, "fedbn", {"norm"});
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedbn", fedkit::aggregators::PartialSharingOptions, Create);

}  // namespace
}  // namespace aggregators
