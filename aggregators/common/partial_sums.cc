#include "aggregators/common/partial_sums.h"

#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace aggregators {

at::Tensor ScalarSum(double value) { return at::scalar_tensor(value, at::kDouble); }

at::Tensor CountSum(int64_t value) { return at::scalar_tensor(value, at::kLong); }

void AddStateSums(absl::string_view prefix, const fl::ModelState& state, NamedSums& sums) {
  for (const fl::ModelState::Entry& e : state.entries()) {
    sums[absl::StrCat(prefix, e.name)] = e.tensor;
  }
}

fl::ModelState StateFromSums(absl::string_view prefix, const fl::ModelState& layout,
                             const NamedSums& sums) {
  std::vector<fl::ModelState::Entry> entries;
  entries.reserve(layout.size());
  for (const fl::ModelState::Entry& e : layout.entries()) {
    entries.push_back({e.name, sums.at(absl::StrCat(prefix, e.name)), e.is_buffer});
  }
  return fl::ModelState(std::move(entries));
}

void AddPrefixed(absl::string_view prefix, const NamedSums& from, NamedSums& to) {
  for (const auto& [name, tensor] : from) to[absl::StrCat(prefix, name)] = tensor;
}

NamedSums WithoutPrefix(absl::string_view prefix, const NamedSums& sums) {
  NamedSums inner;
  for (const auto& [name, tensor] : sums) {
    if (absl::StartsWith(name, prefix)) inner[name.substr(prefix.size())] = tensor;
  }
  return inner;
}

absl::Status CheckPartialSums(const NamedSums& expected, const NamedSums& sums) {
  for (const auto& [name, want] : expected) {
    auto it = sums.find(name);
    if (it == sums.end() || !it->second.defined()) {
      return absl::InvalidArgumentError(absl::StrCat("partial sums: \"", name, "\" is missing"));
    }
    const at::Tensor& got = it->second;
    if (!got.sizes().equals(want.sizes()) || got.scalar_type() != want.scalar_type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "partial sums: \"", name, "\" has shape ", c10::str(got.sizes()), " and dtype ",
          c10::toString(got.scalar_type()), ", expected ", c10::str(want.sizes()), " and ",
          c10::toString(want.scalar_type())));
    }
  }
  for (const auto& [name, tensor] : sums) {
    if (expected.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("partial sums: unexpected \"", name, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckMergeable(const fl::Aggregator& aggregator, bool configured,
                            const NamedSums& sums) {
  if (!configured) return absl::FailedPreconditionError("MergePartialSums before Configure");
  std::optional<NamedSums> expected = aggregator.PartialSums();
  if (!expected.has_value()) {
    return absl::UnimplementedError("this aggregator's accumulation is not a sum of partials");
  }
  return CheckPartialSums(*expected, sums);
}

}  // namespace aggregators
