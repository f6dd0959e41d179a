// Server-FT: FedAvg, then the server fine-tunes the aggregate on its labelled proxy
// set with cross-entropy. The baseline "Server-finetune" of FedLAW (Li et al., ICML
// 2023, Table 3), as its official code runs it (server_funct.py server_finetune):
// the central node's SGD (the clients' lr 0.08, momentum 0.9, weight decay 5e-4,
// never decayed, momentum carried across rounds) for server_epochs = 20 passes over
// the proxy set in shuffled minibatches of 128, in train mode (BatchNorm statistics
// move with the proxy batches). The FedAvg aggregate includes the clients' buffers,
// as the code's state_dict average does; its weighted sum is all-reduced in
// distributed runs, and the fine-tuning follows on one process. Diagnostics:
// proxy_loss_before, proxy_loss_after.
//
//   server { proxy { split: TEST size: 200 } }
//   aggregator {
//     name: "server_ft"
//     options {
//       [type.googleapis.com/fedkit.aggregators.ServerFtOptions] {
//         sgd { epochs: 20 lr: 0.08 momentum: 0.9 weight_decay: 5e-4 batch_size: 128 }
//       }
//     }
//   }

#include <memory>

#include <ATen/ATen.h>

#include "aggregators/common/proxy_training.h"
#include "aggregators/server_ft/server_ft_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

class ServerFt : public ProxyTunedFedAvg {
 public:
  explicit ServerFt(ServerSgdConfig sgd) : ProxyTunedFedAvg("server_ft", sgd) {}

 protected:
  absl::StatusOr<ProxySgd::LossFn> RoundLoss(fl::ServerContext& context) override {
    const fl::Examples* proxy = context.proxy;
    return ProxySgd::LossFn([proxy](fl::Model& model, const at::Tensor& batch) {
      return at::cross_entropy_loss(model.Forward(proxy->x.index_select(0, batch)),
                                    proxy->y.index_select(0, batch));
    });
  }
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateServerFt(
    const fedkit::aggregators::ServerFtOptions& options, const fl::Aggregator::CreateArgs&) {
  FL_ASSIGN_OR_RETURN(ServerSgdConfig sgd, ServerSgdConfigFromOptions(options.sgd(), "options.sgd"));
  return std::make_unique<ServerFt>(sgd);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "server_ft", fedkit::aggregators::ServerFtOptions,
                   CreateServerFt);

}  // namespace
}  // namespace aggregators
