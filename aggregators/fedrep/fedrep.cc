// FedRep (Collins, Hassani, Mokhtari & Shakkottai, "Exploiting Shared
// Representations for Personalized Federated Learning", ICML 2021, Algorithm 1):
// the representation (the body) is shared and averaged by FedAvg; each client
// keeps its own head. A client's local round has two phases: first its head is
// trained with the body fixed (10 epochs in the paper), then the body with its
// new head fixed (the client's local work: client.epochs 1 in the paper). Only
// the body's delta is sent; each client is evaluated with its own head.
//
// The runner keeps the head and runs the phases (fl/personalization.h,
// fl/local_trainer.h), each phase with an optimiser of its own over the part it
// trains: a fixed part does not move, as the paper's GRD steps on h, then on
// phi, say. (The official code keeps one optimiser and sets requires_grad; under
// PyTorch < 2.0 its zero_grad leaves zero gradients on the fixed part, so
// momentum and weight decay still move it a little. Not reproduced.)
//
//   aggregator {
//     name: "fedrep"
//     options {
//       [type.googleapis.com/fedkit.aggregators.FedRepOptions] {
//         # personal_epochs: 10          # the default
//         # personal_groups: "head"      # the default
//         # base { name: "fedadam" }
//       }
//     }
//   }
//   client { epochs: 1 ... }             # the body's phase

#include "absl/strings/str_cat.h"
#include "aggregators/common/personalized_base.h"
#include "aggregators/fedrep/fedrep_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"

namespace aggregators {
namespace {

constexpr int kPaperPersonalEpochs = 10;

absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create(
    const fedkit::aggregators::FedRepOptions& options, const fl::Aggregator::CreateArgs&) {
  const int personal_epochs =
      options.has_personal_epochs() ? options.personal_epochs() : kPaperPersonalEpochs;
  if (personal_epochs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.personal_epochs: must be >= 1, got ", personal_epochs));
  }
  Personalization shape;
  shape.personal.assign(options.personal_groups().begin(), options.personal_groups().end());
  if (shape.personal.empty()) shape.personal = {"head"};
  shape.phases = {{fl::LocalPhase::Part::kPersonal, personal_epochs},
                  {fl::LocalPhase::Part::kShared, 0}};
  return CreatePersonalized(options.base(), std::move(shape), "fedrep");
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedrep", fedkit::aggregators::FedRepOptions, Create);

}  // namespace
}  // namespace aggregators
