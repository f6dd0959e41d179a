// FedAvg (McMahan et al., "Communication-Efficient Learning of Deep Networks from
// Decentralized Data", AISTATS 2017, Algorithm 1): the new global model is the
// data-size weighted mean of the clients' models,
//   w <- w + eta * sum_k (n_k / n) delta_k,   n = sum over this round's accepted clients,
// with a server learning rate eta (1 = the paper's FedAvg; other values are the
// degenerate case of the server-optimiser family of Reddi et al. 2021).
//
// Updates are accumulated in place as they arrive (sum_k n_k delta_k), so memory is
// O(P) whatever the cohort size; in distributed runs the processes' sums are
// all-reduced (PartialSums). Buffers (BatchNorm running statistics) are set to
// the same weighted mean of the clients' values, never scaled by eta; integer
// buffers are rounded.
//
//   aggregator {
//     name: "fedavg"
//     options { [type.googleapis.com/fedkit.aggregators.FedAvgOptions] { server_lr: 1.0 } }
//   }

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "aggregators/common/mean_delta_aggregator.h"
#include "aggregators/fedavg/fedavg_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"

namespace aggregators {
namespace {

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedAvg(
    const fedkit::aggregators::FedAvgOptions& options, const fl::Aggregator::CreateArgs&) {
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  if (!(server_lr > 0) || !std::isfinite(server_lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.server_lr: must be > 0, got ", server_lr));
  }
  return std::make_unique<MeanDeltaAggregator>(server_lr);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedavg", fedkit::aggregators::FedAvgOptions, CreateFedAvg);

}  // namespace
}  // namespace aggregators
