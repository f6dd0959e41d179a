#include "aggregators/common/held_out.h"

#include <algorithm>
#include <unordered_set>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace aggregators {

absl::Status RemoveHeldOut(const at::Tensor& held, const std::vector<int64_t>& client_indices,
                           std::vector<int64_t>& train_indices) {
  const at::Tensor cpu = held.to(at::kCPU, at::kLong).contiguous();
  const int64_t* begin = cpu.data_ptr<int64_t>();
  const std::unordered_set<int64_t> held_set(begin, begin + cpu.numel());
  const auto in_share = static_cast<size_t>(
      std::count_if(client_indices.begin(), client_indices.end(),
                    [&](int64_t i) { return held_set.count(i) > 0; }));
  if (in_share != held_set.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("client state holds ", held_set.size(), " held-out examples, ", in_share,
                     " of them in this client's data"));
  }
  train_indices.erase(std::remove_if(train_indices.begin(), train_indices.end(),
                                     [&](int64_t i) { return held_set.count(i) > 0; }),
                      train_indices.end());
  return absl::OkStatus();
}

}  // namespace aggregators
