#ifndef AGGREGATORS_COMMON_PARTIAL_SUMS_H_
#define AGGREGATORS_COMMON_PARTIAL_SUMS_H_

// Helpers for fl::Aggregator::PartialSums and MergePartialSums, the named tensors
// a distributed run sums over its processes. Not a plugin.
//
// PartialSums hands out the live accumulators themselves, not copies: the run
// sums them in place, and the process that merges takes the result back.
// MergePartialSums checks every name, shape and dtype (against the instance's own
// PartialSums) before it replaces anything, so a refused merge changes nothing.

#include <cstdint>
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fl/aggregator.h"
#include "fl/model_state.h"

namespace aggregators {

using NamedSums = std::map<std::string, at::Tensor>;

// The prefix of a wrapped base aggregator's partial sums (elastic, efl, norm_clip).
inline constexpr char kBaseSums[] = "base/";

// A 0-dimensional float64 (a sum of weights or of scalars) or int64 (a count).
at::Tensor ScalarSum(double value);
at::Tensor CountSum(int64_t value);

// Adds `state`'s tensors to `sums` as "<prefix><entry name>".
void AddStateSums(absl::string_view prefix, const fl::ModelState& state, NamedSums& sums);

// The entries of `layout` (names and buffer flags) holding `sums`'
// "<prefix><entry name>". REQUIRES: CheckPartialSums passed.
fl::ModelState StateFromSums(absl::string_view prefix, const fl::ModelState& layout,
                             const NamedSums& sums);

// Adds `from`'s tensors to `to` with `prefix` before their names.
void AddPrefixed(absl::string_view prefix, const NamedSums& from, NamedSums& to);
// The tensors of `sums` whose names start with `prefix`, under the rest of the name.
NamedSums WithoutPrefix(absl::string_view prefix, const NamedSums& sums);

// InvalidArgument naming the first difference unless `sums` holds exactly the
// names of `expected`, each with its shape and dtype.
absl::Status CheckPartialSums(const NamedSums& expected, const NamedSums& sums);

// Where every MergePartialSums begins: FailedPrecondition before Configure
// (`configured` false: the layout of the sums is not known yet), Unimplemented
// when `aggregator` has no partial sums this round (a wrapper whose base has
// none), else CheckPartialSums against its own PartialSums.
absl::Status CheckMergeable(const fl::Aggregator& aggregator, bool configured,
                            const NamedSums& sums);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_PARTIAL_SUMS_H_
