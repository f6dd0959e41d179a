// FedAvg (McMahan et al., "Communication-Efficient Learning of Deep Networks from
// Decentralized Data", AISTATS 2017, Algorithm 1): the new global model is the
// data-size weighted mean of the clients' models,
//   w <- w + eta * sum_k (n_k / n) delta_k,   n = sum over this round's accepted clients,
// with a server learning rate eta (1 = the paper's FedAvg; other values are the
// degenerate case of the server-optimiser family of Reddi et al. 2021).
//
// Updates are accumulated in place as they arrive (sum_k n_k delta_k), so memory is
// O(P) whatever the cohort size. Buffers (BatchNorm running statistics) are set to
// the same weighted mean of the clients' values, never scaled by eta; integer
// buffers are rounded.
//
//   aggregator {
//     name: "fedavg"
//     options { [type.googleapis.com/fedkit.aggregators.FedAvgOptions] { server_lr: 1.0 } }
//   }

#include <cmath>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "aggregators/fedavg/fedavg_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

class FedAvg : public fl::Aggregator {
 public:
  explicit FedAvg(double server_lr) : server_lr_(server_lr) {}

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    if (!weighted_sum_.has_value()) {
      weighted_sum_ = update.delta.ZerosLike();
    } else {
      FL_RETURN_IF_ERROR(weighted_sum_->CheckSameLayout(update.delta));
    }
    weighted_sum_->Axpy(static_cast<double>(update.num_examples), update.delta);
    total_examples_ += update.num_examples;
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    if (!weighted_sum_.has_value() || total_examples_ <= 0) {
      return absl::FailedPreconditionError("fedavg: no update accumulated this round");
    }
    fl::ModelState next = global.Clone();
    next.Axpy(server_lr_ / total_examples_, 1.0 / total_examples_, *weighted_sum_);
    weighted_sum_.reset();
    total_examples_ = 0;
    return next;
  }

 private:
  double server_lr_;
  std::optional<fl::ModelState> weighted_sum_;
  int64_t total_examples_ = 0;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedAvg(
    const fedkit::aggregators::FedAvgOptions& options, const fl::Aggregator::CreateArgs&) {
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  if (!(server_lr > 0) || !std::isfinite(server_lr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.server_lr: must be > 0, got ", server_lr));
  }
  return std::make_unique<FedAvg>(server_lr);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "fedavg", fedkit::aggregators::FedAvgOptions, CreateFedAvg);

}  // namespace
}  // namespace aggregators
