#include "fl/data_splits.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "fl/status_macros.h"

namespace fl {

namespace {

// Takes counts[c] examples of class c, each class's members shuffled by one rng in
// class order. `what` names the set in errors.
absl::StatusOr<std::pair<Examples, Examples>> TakeCounts(
    const Examples& from, const std::vector<int64_t>& counts, uint64_t seed,
    const std::string& what) {
  const at::Tensor labels = from.y.to(at::kCPU).contiguous();
  const int64_t* y = labels.data_ptr<int64_t>();
  const auto num_classes = static_cast<int64_t>(counts.size());
  std::vector<std::vector<int64_t>> by_class(num_classes);
  for (int64_t i = 0; i < from.size(); ++i) by_class[y[i]].push_back(i);

  std::mt19937_64 rng(seed);
  std::vector<bool> taken(from.size(), false);
  for (int64_t c = 0; c < num_classes; ++c) {
    const int64_t want = counts[c];
    if (static_cast<int64_t>(by_class[c].size()) < want) {
      return absl::FailedPreconditionError(absl::StrCat(
          "class ", c, " has ", by_class[c].size(), " examples, ", what, " needs ", want));
    }
    std::shuffle(by_class[c].begin(), by_class[c].end(), rng);
    for (int64_t j = 0; j < want; ++j) taken[by_class[c][j]] = true;
  }
  std::vector<int64_t> take_idx, rest_idx;
  for (int64_t i = 0; i < from.size(); ++i) (taken[i] ? take_idx : rest_idx).push_back(i);
  auto gather = [&](const std::vector<int64_t>& idx) {
    const at::Tensor index = at::tensor(idx, at::kLong).to(from.y.device());
    return Examples{from.x.index_select(0, index), from.y.index_select(0, index)};
  };
  return std::make_pair(gather(take_idx), gather(rest_idx));
}

}  // namespace

absl::StatusOr<std::pair<Examples, Examples>> TakeClassBalanced(const Examples& from,
                                                                        int64_t size,
                                                                        int64_t num_classes,
                                                                        uint64_t seed) {
  if (size > from.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot take ", size, " examples from a split of ", from.size()));
  }
  std::vector<int64_t> counts(num_classes);
  for (int64_t c = 0; c < num_classes; ++c) {
    counts[c] = size / num_classes + (c < size % num_classes ? 1 : 0);
  }
  return TakeCounts(from, counts, seed, absl::StrCat("a balanced set of ", size));
}

std::vector<int64_t> LongTailedClassCounts(int64_t size, int64_t num_classes, double imbalance) {
  std::vector<int64_t> counts(num_classes);
  const double share = static_cast<double>(size) / static_cast<double>(num_classes);
  for (int64_t c = 0; c < num_classes; ++c) {
    const double exponent =
        num_classes > 1 ? static_cast<double>(c) / static_cast<double>(num_classes - 1) : 0.0;
    counts[c] = static_cast<int64_t>(std::floor(share * std::pow(imbalance, exponent)));
  }
  return counts;
}

absl::StatusOr<std::pair<Examples, Examples>> TakeLongTailed(const Examples& from,
                                                                     int64_t size,
                                                                     int64_t num_classes,
                                                                     double imbalance,
                                                                     uint64_t seed) {
  const std::vector<int64_t> counts = LongTailedClassCounts(size, num_classes, imbalance);
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (total == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a long-tailed set of ", size, " over ", num_classes, " classes takes no example"));
  }
  return TakeCounts(from, counts, seed,
                    absl::StrCat("a long-tailed set of ", total, " (size ", size, ")"));
}

absl::StatusOr<Examples> TakeProxy(const fedkit::ProxySpec& proxy, int64_t num_classes,
                                       uint64_t seed, DatasetSplits& data) {
  if (proxy.size() == 0) return Examples{};
  auto take = [&](const Examples& from) {
    return proxy.has_imbalance() && proxy.imbalance() < 1
               ? TakeLongTailed(from, proxy.size(), num_classes, proxy.imbalance(), seed)
               : TakeClassBalanced(from, proxy.size(), num_classes, seed);
  };
  const bool from_train = proxy.split() == fedkit::ProxySpec::TRAIN;
  Examples& source = from_train ? data.train : data.test;
  FL_ASSIGN_OR_RETURN(auto split, take(source));
  // The choice depends only on the labels and the seed, so taking from the owner
  // ids (as inputs beside the same labels) drops the same rows.
  if (from_train && data.train_owners.defined()) {
    FL_ASSIGN_OR_RETURN(auto owners, take({data.train_owners, data.train.y}));
    data.train_owners = std::move(owners.second.x);
  }
  source = std::move(split.second);
  return std::move(split.first);
}

}  // namespace fl
