#include "fl/data_splits.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "fl/index_files.h"
#include "fl/status_macros.h"

namespace fl {

namespace {

// The indices, ascending, of counts[c] examples of class c of `labels`, each
// class's members shuffled by one rng in class order. `what` names the set in
// errors.
absl::StatusOr<std::vector<int64_t>> DrawCounts(const at::Tensor& labels,
                                                const std::vector<int64_t>& counts,
                                                uint64_t seed, const std::string& what) {
  const at::Tensor cpu_labels = labels.to(at::kCPU).contiguous();
  const int64_t* y = cpu_labels.data_ptr<int64_t>();
  const int64_t n = cpu_labels.numel();
  const auto num_classes = static_cast<int64_t>(counts.size());
  std::vector<std::vector<int64_t>> by_class(num_classes);
  for (int64_t i = 0; i < n; ++i) by_class[y[i]].push_back(i);

  std::mt19937_64 rng(seed);
  std::vector<bool> taken(n, false);
  for (int64_t c = 0; c < num_classes; ++c) {
    const int64_t want = counts[c];
    if (static_cast<int64_t>(by_class[c].size()) < want) {
      return absl::FailedPreconditionError(absl::StrCat(
          "class ", c, " has ", by_class[c].size(), " examples, ", what, " needs ", want));
    }
    std::shuffle(by_class[c].begin(), by_class[c].end(), rng);
    for (int64_t j = 0; j < want; ++j) taken[by_class[c][j]] = true;
  }
  std::vector<int64_t> take_idx;
  for (int64_t i = 0; i < n; ++i) {
    if (taken[i]) take_idx.push_back(i);
  }
  return take_idx;
}

// {from's rows `taken`, in that order; the other rows, in their order}.
std::pair<Examples, Examples> SplitAt(const Examples& from, const std::vector<int64_t>& taken) {
  std::vector<bool> is_taken(from.size(), false);
  for (int64_t i : taken) is_taken[i] = true;
  std::vector<int64_t> rest;
  for (int64_t i = 0; i < from.size(); ++i) {
    if (!is_taken[i]) rest.push_back(i);
  }
  auto gather = [&](const std::vector<int64_t>& idx) {
    const at::Tensor index = at::tensor(idx, at::kLong).to(from.y.device());
    return Examples{from.x.index_select(0, index), from.y.index_select(0, index)};
  };
  return std::make_pair(gather(taken), gather(rest));
}

absl::StatusOr<std::vector<int64_t>> ClassBalancedIndices(const Examples& from, int64_t size,
                                                          int64_t num_classes, uint64_t seed) {
  if (size > from.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot take ", size, " examples from a split of ", from.size()));
  }
  std::vector<int64_t> counts(num_classes);
  for (int64_t c = 0; c < num_classes; ++c) {
    counts[c] = size / num_classes + (c < size % num_classes ? 1 : 0);
  }
  return DrawCounts(from.y, counts, seed, absl::StrCat("a balanced set of ", size));
}

absl::StatusOr<std::vector<int64_t>> LongTailedIndices(const Examples& from, int64_t size,
                                                       int64_t num_classes, double imbalance,
                                                       uint64_t seed) {
  const std::vector<int64_t> counts = LongTailedClassCounts(size, num_classes, imbalance);
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (total == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a long-tailed set of ", size, " over ", num_classes, " classes takes no example"));
  }
  return DrawCounts(from.y, counts, seed,
                    absl::StrCat("a long-tailed set of ", total, " (size ", size, ")"));
}

// The rows of the proxy set in `from` (the split proxy.split names), in the
// proxy set's order: the file's, or drawn.
absl::StatusOr<std::vector<int64_t>> ProxyIndices(const fedkit::ProxySpec& proxy,
                                                  const Examples& from, int64_t num_classes,
                                                  uint64_t seed) {
  if (!proxy.indices_path().empty()) {
    const std::string path = ResolveUserPath(proxy.indices_path());
    absl::StatusOr<std::string> json = ReadTextFile(path, "proxy file");
    absl::StatusOr<std::vector<int64_t>> indices =
        json.ok() ? ParseProxyFile(*json, path, from.size(),
                                   fedkit::ProxySpec::Split_Name(proxy.split()))
                  : json.status();
    if (!indices.ok()) {
      return absl::Status(indices.status().code(), absl::StrCat("server.proxy.indices_path: ",
                                                                indices.status().message()));
    }
    return indices;
  }
  return proxy.has_imbalance() && proxy.imbalance() < 1
             ? LongTailedIndices(from, proxy.size(), num_classes, proxy.imbalance(), seed)
             : ClassBalancedIndices(from, proxy.size(), num_classes, seed);
}

}  // namespace

absl::StatusOr<std::pair<Examples, Examples>> TakeClassBalanced(const Examples& from,
                                                                        int64_t size,
                                                                        int64_t num_classes,
                                                                        uint64_t seed) {
  FL_ASSIGN_OR_RETURN(std::vector<int64_t> taken,
                      ClassBalancedIndices(from, size, num_classes, seed));
  return SplitAt(from, taken);
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
  FL_ASSIGN_OR_RETURN(std::vector<int64_t> taken,
                      LongTailedIndices(from, size, num_classes, imbalance, seed));
  return SplitAt(from, taken);
}

absl::StatusOr<Examples> TakeProxy(const fedkit::ProxySpec& proxy, int64_t num_classes,
                                   uint64_t seed, DatasetSplits& data,
                                   std::vector<int64_t>* indices) {
  if (proxy.size() == 0 && proxy.indices_path().empty()) return Examples{};
  const bool from_train = proxy.split() == fedkit::ProxySpec::TRAIN;
  Examples& source = from_train ? data.train : data.test;
  FL_ASSIGN_OR_RETURN(std::vector<int64_t> taken,
                      ProxyIndices(proxy, source, num_classes, seed));
  auto split = SplitAt(source, taken);
  // The owner ids (as inputs beside the same labels) lose the same rows.
  if (from_train && data.train_owners.defined()) {
    data.train_owners = SplitAt({data.train_owners, data.train.y}, taken).second.x;
  }
  source = std::move(split.second);
  if (indices != nullptr) *indices = std::move(taken);
  return std::move(split.first);
}

}  // namespace fl
