// FedDF (Lin, Kong, Stich & Jaggi, "Ensemble Distillation for Robust Model Fusion
// in Federated Learning", NeurIPS 2020), as the FedLAW repository runs it as a
// baseline (server_funct.py feddf): the student is the FedAvg aggregate; the teacher
// is the ensemble of the round's client models (each in eval mode, logits averaged
// uniformly); the student is trained in train mode on the proxy inputs (labels
// unused) to minimise
//   T^2 * KL( softmax(teacher / T) || softmax(student / T) ),  mean over the batch,
// with the central node's SGD (lr 0.08, momentum 0.9 kept across rounds, weight
// decay 5e-4) for server_epochs = 20 passes in shuffled minibatches of 128. T = 1 is
// the code's loss (F.kl_div(log_softmax(s), softmax(t), "batchmean")).
//
// Each client model w + delta_i (its own buffers included) is evaluated on the
// proxy inputs as its update arrives, so only its [proxy, classes] logits are kept;
// they are averaged in client-id order. Distributed runs gather the round's updates
// to one process (no partial sums). Diagnostics: proxy_loss_before,
// proxy_loss_after (cross-entropy on the proxy labels).
//
//   server { proxy { split: TEST size: 200 } }
//   aggregator {
//     name: "feddf"
//     options {
//       [type.googleapis.com/fedkit.aggregators.FedDfOptions] {
//         sgd { epochs: 20 lr: 0.08 momentum: 0.9 weight_decay: 5e-4 batch_size: 128 }
//         temperature: 1
//       }
//     }
//   }

#include <cmath>
#include <map>
#include <memory>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/common/proxy_training.h"
#include "aggregators/feddf/feddf_options.pb.h"
#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

class FedDf : public ProxyTunedFedAvg {
 public:
  FedDf(ServerSgdConfig sgd, double temperature)
      : ProxyTunedFedAvg("feddf", sgd), temperature_(temperature) {}

  // Left to the default: the teacher's logits are kept per client (averaged in
  // client-id order, so arrival order cannot change a bit), and their shape is
  // known only once a client model has run.
  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties = ProxyTunedFedAvg::properties();
    properties.sums_only = false;
    return properties;
  }
  std::optional<NamedSums> PartialSums() const override { return std::nullopt; }
  absl::Status MergePartialSums(NamedSums sums) override {
    return fl::Aggregator::MergePartialSums(std::move(sums));
  }

 protected:
  void StartRound() override { logits_.clear(); }

  absl::Status Inspect(const fl::ClientUpdate& update, fl::ServerContext& context) override {
    if (logits_.count(update.client_id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("a second update from client ", update.client_id, " this round"));
    }
    if (teacher_ == nullptr) {
      FL_ASSIGN_OR_RETURN(teacher_, context.new_model());
    }
    FL_RETURN_IF_ERROR(
        fl::ModelState::Sum(global(), 1.0, 1.0, update.delta).LoadInto(*teacher_));
    at::NoGradGuard no_grad;
    teacher_->eval();
    logits_[update.client_id] = teacher_->Forward(context.proxy->x);
    return absl::OkStatus();
  }

  absl::StatusOr<ProxySgd::LossFn> RoundLoss(fl::ServerContext& context) override {
    if (logits_.empty()) return absl::FailedPreconditionError("no teacher logits this round");
    at::Tensor sum;
    for (const auto& [id, logits] : logits_) sum = sum.defined() ? sum + logits : logits;
    const at::Tensor teacher = sum / static_cast<double>(logits_.size());
    logits_.clear();
    const double t = temperature_;
    const at::Tensor teacher_log_p = at::log_softmax(teacher / t, 1);
    const at::Tensor teacher_p = teacher_log_p.exp();
    const fl::Examples* proxy = context.proxy;
    return ProxySgd::LossFn([=](fl::Model& model, const at::Tensor& batch) {
      const at::Tensor student_log_p =
          at::log_softmax(model.Forward(proxy->x.index_select(0, batch)) / t, 1);
      const at::Tensor kl = (teacher_p.index_select(0, batch) *
                             (teacher_log_p.index_select(0, batch) - student_log_p))
                                .sum(1)
                                .mean();
      return kl * (t * t);
    });
  }

 private:
  const double temperature_;
  std::unique_ptr<fl::Model> teacher_;  // built once, loaded with each client model
  std::map<int64_t, at::Tensor> logits_;  // client id -> [proxy, classes]
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateFedDf(
    const fedkit::aggregators::FedDfOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  absl::StatusOr<ServerSgdConfig> sgd = ServerSgdConfigFromOptions(options.sgd(), "options.sgd");
  if (!sgd.ok()) errors.AddStatus("", sgd.status());
  const double temperature = options.has_temperature() ? options.temperature() : 1.0;
  if (!(temperature > 0) || !std::isfinite(temperature)) {
    errors.Add("options.temperature", absl::StrCat("must be > 0, got ", temperature));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<FedDf>(*sgd, temperature);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "feddf", fedkit::aggregators::FedDfOptions, CreateFedDf);
FL_CONFORMANCE_REASON("feddf", kNoPartialSums,
                      "the teacher's logits are kept per client and averaged in client-id "
                      "order, so that arrival order cannot change a bit");

}  // namespace
}  // namespace aggregators
