// FedBABU (Oh, Kim & Yun, "FedBABU: Toward Enhanced Representation for Federated
// Image Classification", ICLR 2022, Algorithm 1): the head (the classifier) is
// randomly initialised and never trained during federated training; only the
// body is trained on the clients and averaged by FedAvg. Personalisation comes
// at evaluation: each client fine-tunes the whole model on its own data, which
// in fedkit is server.client_evaluation.fine_tune_steps (the paper fine-tunes
// for a few epochs; set the steps to match).
//
// The runner keeps the frozen tensors out of the optimiser, the update and what
// the base aggregator sees (fl/personalization.h); the plugin only declares them.
//
//   aggregator {
//     name: "fedbabu"
//     options {
//       [type.googleapis.com/fedkit.aggregators.FedBabuOptions] {
//         # frozen_groups: "head"   # the default
//         # base { name: "fedadam" }
//       }
//     }
//   }
//   server { client_evaluation { fine_tune_steps: 10 } }

#include "aggregators/common/personalized_base.h"
#include "aggregators/fedbabu/fedbabu_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"

namespace aggregators {
namespace {

absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(
    const fedkit::aggregators::FedBabuOptions& options, const fl::Aggregator::CreateArgs&) {
  Personalization groups;
  groups.frozen.assign(options.frozen_groups().begin(), options.frozen_groups().end());
  if (groups.frozen.empty()) groups.frozen = {"head"};
  return CreatePersonalized(options.base(), std::move(groups), "fedbabu");
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedbabu", fedkit::aggregators::FedBabuOptions, Create);

}  // namespace
}  // namespace aggregators
