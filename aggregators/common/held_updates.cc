#include "aggregators/common/held_updates.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace aggregators {

namespace {

// Columns per chunk in CoordinateWise.
constexpr int64_t kChunk = int64_t{1} << 16;

// The dtype a rule computes in: integer counters go through float64.
at::ScalarType ComputeType(const at::Tensor& t) {
  return at::isFloatingType(t.scalar_type()) ? t.scalar_type() : at::kDouble;
}

}  // namespace

absl::Status HeldUpdates::Add(fl::ClientUpdate update) {
  if (!updates_.empty()) {
    if (absl::Status s = updates_.front().delta.CheckSameLayout(update.delta); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("delta: ", s.message()));
    }
  }
  updates_.push_back(std::move(update));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<fl::ClientUpdate>> HeldUpdates::Take(const fl::ModelState& global) {
  std::vector<fl::ClientUpdate> updates = std::move(updates_);
  updates_.clear();
  if (updates.empty()) return absl::FailedPreconditionError("no update accumulated this round");
  if (absl::Status s = global.CheckSameLayout(updates.front().delta); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the round's deltas do not fit the global model: ", s.message()));
  }
  return updates;
}

fl::ModelState CoordinateWise(const std::vector<fl::ClientUpdate>& updates,
                              const CoordinateRule& rule) {
  CHECK(!updates.empty());
  at::NoGradGuard no_grad;
  const fl::ModelState& first = updates.front().delta;
  std::vector<fl::ModelState::Entry> entries;
  entries.reserve(first.size());
  std::vector<at::Tensor> flat(updates.size());
  std::vector<at::Tensor> rows(updates.size());
  for (size_t e = 0; e < first.size(); ++e) {
    const at::Tensor& like = first.tensor(e);
    const at::ScalarType type = ComputeType(like);
    const int64_t n = like.numel();
    for (size_t k = 0; k < updates.size(); ++k) flat[k] = updates[k].delta.tensor(e).reshape({-1});
    at::Tensor result = at::empty({n}, like.options().dtype(type));
    for (int64_t begin = 0; begin < n; begin += kChunk) {
      const int64_t length = std::min(kChunk, n - begin);
      for (size_t k = 0; k < updates.size(); ++k) rows[k] = flat[k].narrow(0, begin, length);
      result.narrow(0, begin, length).copy_(rule(at::stack(rows).to(type)));
    }
    entries.push_back(
        {first.entries()[e].name, result.view(like.sizes()), first.entries()[e].is_buffer});
  }
  return fl::ModelState(std::move(entries));
}

at::Tensor CoordinateMedian(const at::Tensor& values) {
  const int64_t k = values.size(0);
  const at::Tensor sorted = at::msort(values);
  if (k % 2 == 1) return sorted[k / 2];
  return (sorted[k / 2 - 1] + sorted[k / 2]) * 0.5;
}

fl::ModelState WeightedCombination(const std::vector<fl::ClientUpdate>& updates,
                                   const std::vector<double>& weights) {
  CHECK_EQ(updates.size(), weights.size());
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  CHECK_GT(total, 0.0);
  at::NoGradGuard no_grad;
  const fl::ModelState& first = updates.front().delta;
  std::vector<fl::ModelState::Entry> entries;
  entries.reserve(first.size());
  for (size_t e = 0; e < first.size(); ++e) {
    const at::Tensor& like = first.tensor(e);
    const at::ScalarType type = ComputeType(like);
    at::Tensor sum = at::zeros(like.sizes(), like.options().dtype(type));
    for (size_t k = 0; k < updates.size(); ++k) {
      if (weights[k] > 0) sum.add_(updates[k].delta.tensor(e).to(type), weights[k] / total);
    }
    entries.push_back({first.entries()[e].name, std::move(sum), first.entries()[e].is_buffer});
  }
  return fl::ModelState(std::move(entries));
}

}  // namespace aggregators
