#include "aggregators/common/held_out.h"

#include <algorithm>
#include <unordered_set>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace aggregators {

absl::Status RemoveHeldOut(const at::Tensor& held, std::vector<int64_t>& indices) {
  const at::Tensor cpu = held.to(at::kCPU, at::kLong).contiguous();
  const int64_t* begin = cpu.data_ptr<int64_t>();
  const std::unordered_set<int64_t> held_set(begin, begin + cpu.numel());
  const size_t before = indices.size();
  indices.erase(std::remove_if(indices.begin(), indices.end(),
                               [&](int64_t i) { return held_set.count(i) > 0; }),
                indices.end());
  if (before - indices.size() != held_set.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "client state holds ", held_set.size(), " held-out examples, ",
        before - indices.size(), " of them in this round's training indices"));
  }
  return absl::OkStatus();
}

}  // namespace aggregators
