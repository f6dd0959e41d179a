#ifndef AGGREGATORS_COMMON_SCALAR_TOY_H_
#define AGGREGATORS_COMMON_SCALAR_TOY_H_

// Test-only: the one-parameter problem the proxy-set methods' tests compute by hand.
// The model's logits are (w x, -w x); two clients sit at w = 1 (1 example) and w = 3
// (3 examples) around a global w = 0, so FedAvg gives 2.5; the proxy set is x = 1
// labelled 0 and x = 1 labelled 1, so the proxy loss is
//   L(w) = (log(1 + e^{-2w}) + log(1 + e^{2w})) / 2,   dL/dw = tanh(w).

#include <cmath>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "fl/aggregator.h"
#include "fl/model.h"

namespace aggregators::toy {

class ScalarModel : public fl::Model {
 public:
  ScalarModel() { w_ = register_parameter("w", at::zeros({1}, at::kDouble)); }
  at::Tensor Forward(const at::Tensor& x) override { return at::cat({x * w_, -x * w_}, 1); }

 private:
  at::Tensor w_;
};

inline fl::ModelState Scalar(double w) {
  return fl::ModelState({{"w", at::full({1}, w, at::kDouble), false}});
}

inline double ScalarToyLoss(double w) {
  return (std::log1p(std::exp(-2 * w)) + std::log1p(std::exp(2 * w))) / 2;
}

struct ScalarToy {
  fl::Examples proxy{at::ones({2, 1}, at::kDouble), at::tensor({0, 1}, at::kLong)};

  // A context lending `proxy` (so the toy must outlive it) and ScalarModels.
  fl::ServerContext Context() const {
    fl::ServerContext context;
    context.round = 1;
    context.round_seed = 3;
    context.proxy = &proxy;
    context.new_model = [] {
      return absl::StatusOr<std::unique_ptr<fl::Model>>(std::make_unique<ScalarModel>());
    };
    return context;
  }

  static std::vector<fl::ClientUpdate> Updates() {
    std::vector<fl::ClientUpdate> updates(2);
    updates[0].client_id = 7;
    updates[0].num_examples = 1;
    updates[0].delta = Scalar(1);
    updates[1].client_id = 9;
    updates[1].num_examples = 3;
    updates[1].delta = Scalar(3);
    return updates;
  }

  // Configure, Accumulate each update, Finalize, from global w = 0.
  static absl::StatusOr<fl::ModelState> Round(fl::Aggregator& aggregator,
                                              fl::ServerContext& context) {
    const fl::ModelState global = Scalar(0);
    auto plan = aggregator.Configure(global, context);
    if (!plan.ok()) return plan.status();
    for (fl::ClientUpdate& u : Updates()) {
      absl::Status s = aggregator.Accumulate(std::move(u), context);
      if (!s.ok()) return s;
    }
    return aggregator.Finalize(global, context);
  }
};

}  // namespace aggregators::toy

#endif  // AGGREGATORS_COMMON_SCALAR_TOY_H_
