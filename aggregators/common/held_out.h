#ifndef AGGREGATORS_COMMON_HELD_OUT_H_
#define AGGREGATORS_COMMON_HELD_OUT_H_

// The step client hooks that hold the same examples out round after round share
// (the "holdout" hook, Elastic's fixed B_k): take a held-out set kept in the
// client's hook state back out of this round's training indices. Not a plugin.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"

namespace aggregators {

// Removes every index in `held` (int64, any device) from `indices`, keeping the
// order of the rest. FailedPrecondition, naming both counts, when some of `held`
// is not in `indices` (client state that does not belong to this client's data).
absl::Status RemoveHeldOut(const at::Tensor& held, std::vector<int64_t>& indices);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_HELD_OUT_H_
