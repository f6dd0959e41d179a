#ifndef AGGREGATORS_COMMON_HELD_OUT_H_
#define AGGREGATORS_COMMON_HELD_OUT_H_

// What client hooks that hold examples out of local training share (the "holdout"
// hook, Elastic's B_k): each draws its set from the client's whole share and
// removes it from this round's training indices, so several such hooks compose
// whatever their order (their sets may overlap; training uses what none holds
// out). Not a plugin.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"

namespace aggregators {

// Removes every index in `held` (int64, any device) from `train_indices`, keeping
// the order of the rest; an index another hook already removed is skipped.
// FailedPrecondition, naming the counts, when some of `held` is not in
// `client_indices` (client state that does not belong to this client's data).
absl::Status RemoveHeldOut(const at::Tensor& held, const std::vector<int64_t>& client_indices,
                           std::vector<int64_t>& train_indices);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_HELD_OUT_H_
