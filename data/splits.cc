#include "data/splits.h"

#include <algorithm>
#include <random>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace data {

absl::StatusOr<std::pair<fl::Examples, fl::Examples>> TakeClassBalanced(const fl::Examples& from,
                                                                        int64_t size,
                                                                        int64_t num_classes,
                                                                        uint64_t seed) {
  if (size > from.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot take ", size, " examples from a split of ", from.size()));
  }
  const at::Tensor labels = from.y.to(at::kCPU).contiguous();
  const int64_t* y = labels.data_ptr<int64_t>();
  std::vector<std::vector<int64_t>> by_class(num_classes);
  for (int64_t i = 0; i < from.size(); ++i) by_class[y[i]].push_back(i);

  std::mt19937_64 rng(seed);
  std::vector<bool> taken(from.size(), false);
  for (int64_t c = 0; c < num_classes; ++c) {
    const int64_t want = size / num_classes + (c < size % num_classes ? 1 : 0);
    if (static_cast<int64_t>(by_class[c].size()) < want) {
      return absl::FailedPreconditionError(absl::StrCat(
          "class ", c, " has ", by_class[c].size(), " examples, a balanced set of ", size,
          " needs ", want));
    }
    std::shuffle(by_class[c].begin(), by_class[c].end(), rng);
    for (int64_t j = 0; j < want; ++j) taken[by_class[c][j]] = true;
  }
  std::vector<int64_t> take_idx, rest_idx;
  for (int64_t i = 0; i < from.size(); ++i) (taken[i] ? take_idx : rest_idx).push_back(i);
  auto gather = [&](const std::vector<int64_t>& idx) {
    const at::Tensor index = at::tensor(idx, at::kLong).to(from.y.device());
    return fl::Examples{from.x.index_select(0, index), from.y.index_select(0, index)};
  };
  return std::make_pair(gather(take_idx), gather(rest_idx));
}

}  // namespace data
