#ifndef AGGREGATORS_COMMON_PROXY_TRAINING_H_
#define AGGREGATORS_COMMON_PROXY_TRAINING_H_

// Server-side work on the proxy set (ServerContext::proxy) shared by the methods
// that train on it (FedLAW, Server-FT, FedDF): the check that the spec lends one,
// shuffled minibatches, the proxy loss, the server's SGD whose momentum outlives a
// round (the official FedLAW repository's central optimiser), and the
// FedAvg-then-train frame of Server-FT and FedDF. Not a plugin.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/common/server_sgd_options.pb.h"
#include "aggregators/common/weighted_mean.h"
#include "fl/aggregator.h"
#include "fl/dataset.h"
#include "fl/model.h"

namespace aggregators {

// FailedPrecondition naming `server.proxy.size` when the spec lends no proxy set.
absl::Status RequireProxy(const fl::ServerContext& context, absl::string_view method);

// One epoch's minibatches over [0, n): a fresh shuffle drawn from `rng`, then
// consecutive slices of `batch_size` (the last one smaller), as int64 on `device`.
std::vector<at::Tensor> ShuffledBatches(int64_t n, int64_t batch_size, std::mt19937_64& rng,
                                        at::Device device);

// One epoch's order of [0, n): shuffled from `rng` as ShuffledBatches does, or in
// order when `rng` is null (so that another implementation reading the proxy set in
// the same order sees the same batches).
std::vector<int64_t> EpochOrder(int64_t n, std::mt19937_64* rng);
// Consecutive slices of `order` (positions in the proxy set), `batch_size` long, the
// last one smaller: a recorded epoch's batches.
std::vector<at::Tensor> OrderedBatches(const std::vector<int64_t>& order, int64_t batch_size,
                                       at::Device device);

// Mean cross-entropy of `model` over `examples` in eval mode, without gradients
// (BatchNorm statistics untouched). The model is left in train mode.
double ProxyLoss(fl::Model& model, const fl::Examples& examples);

// The validated ServerSgdOptions with defaults filled in.
struct ServerSgdConfig {
  int64_t epochs = 20;  // used when steps == 0
  int64_t steps = 0;
  int64_t batch_size = 128;
  double lr = 0.08;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  bool persist_momentum = true;
  bool adam = false;
  double beta1 = 0.5;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// Errors name fields under `path` (e.g. "options.sgd").
absl::StatusOr<ServerSgdConfig> ServerSgdConfigFromOptions(
    const fedkit::aggregators::ServerSgdOptions& options, const std::string& path);

// Trains `model` on the proxy set in train mode with SGD (torch.optim.SGD's rule:
// d = grad + wd * p; b = m * b + d, b = d at its first step; p -= lr * b) or Adam
// (torch.optim.Adam's rule on d), for the configured budget of shuffled minibatches.
// `loss` maps (model, batch indices) to the batch's loss. The optimiser's state
// lives in this object: with persist_momentum it carries into the next round's
// training, as the official code's central optimiser does; SaveState/RestoreState
// carry it through checkpoints.
class ProxySgd {
 public:
  using LossFn = std::function<at::Tensor(fl::Model&, const at::Tensor& batch)>;

  explicit ProxySgd(ServerSgdConfig config) : config_(config) {}

  absl::Status Train(fl::Model& model, int64_t proxy_size, uint64_t seed, const LossFn& loss);

  std::map<std::string, at::Tensor> SaveState() const;
  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state);

 private:
  // d's step for parameter `name` under SGD's momentum or Adam's moments.
  absl::StatusOr<at::Tensor> Direction(const std::string& name, const at::Tensor& p,
                                       const at::Tensor& d);

  ServerSgdConfig config_;
  // Slot prefix + parameter name -> tensor: SGD's momentum, Adam's two moments.
  std::map<std::string, at::Tensor> state_;
  int64_t adam_steps_ = 0;
};

// FedAvg's aggregate (data-size weighted, buffers included), then ProxySgd on the
// proxy set with a method's loss: the shared frame of Server-FT and FedDF. The
// server model runs in train mode, so BatchNorm statistics move with the proxy
// batches. Reports proxy_loss_before and proxy_loss_after (eval mode, whole proxy
// set) as diagnostics. Subclasses supply the loss and may inspect each update.
class ProxyTunedFedAvg : public fl::Aggregator {
 public:
  ProxyTunedFedAvg(std::string method, ServerSgdConfig sgd)
      : method_(std::move(method)), sgd_(sgd) {}

  fl::AggregatorProperties properties() const override;
  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override;
  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override;
  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override;
  // The FedAvg aggregate's weighted sum; the proxy training follows the merge.
  std::optional<NamedSums> PartialSums() const override;
  absl::Status MergePartialSums(NamedSums sums) override;
  std::map<std::string, at::Tensor> SaveState() const override { return sgd_.SaveState(); }
  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state) override {
    return sgd_.RestoreState(state);
  }

 protected:
  // Called by Configure: drop whatever an unfinished round left.
  virtual void StartRound() {}
  // Called for each update that passed the checks, before it is averaged in.
  virtual absl::Status Inspect(const fl::ClientUpdate& update, fl::ServerContext& context) {
    return absl::OkStatus();
  }
  // This round's training loss, built after the last update arrived.
  virtual absl::StatusOr<ProxySgd::LossFn> RoundLoss(fl::ServerContext& context) = 0;
  // This round's global model, as Configure received it.
  const fl::ModelState& global() const { return *global_; }

 private:
  absl::StatusOr<fl::ModelState> FinalizeUnguarded(const fl::ModelState& global,
                                                   fl::ServerContext& context);

  const std::string method_;
  ProxySgd sgd_;
  WeightedMean mean_;
  std::optional<fl::ModelState> global_;  // shares storage with the server's global
  std::unique_ptr<fl::Model> model_;      // built once, loaded every round
};

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_PROXY_TRAINING_H_
