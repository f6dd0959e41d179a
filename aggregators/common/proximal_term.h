#ifndef AGGREGATORS_COMMON_PROXIMAL_TERM_H_
#define AGGREGATORS_COMMON_PROXIMAL_TERM_H_

// The proximal term (mu / 2) ||w - w_global||^2 over the model's parameters, as a
// client hook's loss term: FedProx's local objective (Li et al., MLSys 2020,
// Eq. 2) and Ditto's personal one (Li et al., ICML 2021, Eq. 2), whose anchor is
// the round's global model (HookContext::global).

#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "fl/client_hook.h"

namespace aggregators {

class ProximalTerm : public fl::ClientHook {
 public:
  // `mu` >= 0 (checked by the caller's options).
  explicit ProximalTerm(double mu) : mu_(mu) {}

  absl::Status BeforeTraining(fl::HookContext& context) override;
  at::Tensor LossTerm(fl::HookContext& context) override;

 private:
  double mu_;
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> anchors_;
};

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_PROXIMAL_TERM_H_
