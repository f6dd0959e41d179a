#ifndef AGGREGATORS_COMMON_CLASS_AWARE_MEAN_H_
#define AGGREGATORS_COMMON_CLASS_AWARE_MEAN_H_

// The "split average" of one-shot FL under label skew (MA-Echo's code,
// noniid_avgmodel): every tensor is the uniform mean over the clients, except the
// classifier, whose row for class c is the mean over only the clients that hold c.
// A client's classes come from the "class_counts" client hook's extra. Not a
// plugin: the split_average and maecho plugins share it.

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "aggregators/common/partial_sums.h"
#include "fl/aggregator.h"
#include "fl/client_update.h"
#include "fl/model_state.h"

namespace aggregators {

// The extra the "class_counts" hook adds: one entry, "counts", the client's
// training examples per class (int64, one per class label up to the federation's
// largest).
inline constexpr char kClassCountsExtra[] = "class_counts";

// The round-plan entry that asks every client for its class counts.
fl::HookRequest ClassCountsRequest();

// The option min_class_examples of the class-aware aggregators: 2 when unset (MA-Echo's
// code counts the classes with more than one example), else >= 1.
absl::StatusOr<int64_t> ResolveMinClassExamples(std::optional<int32_t> option);

// The classifier's entries in a model's layout: the last parameter of 2 or more
// dimensions (its rows are the classes) and, when the next parameter is a vector
// of as many elements, its bias.
struct ClassifierEntries {
  size_t weight = 0;
  std::optional<size_t> bias;
  int64_t classes = 0;
};
absl::StatusOr<ClassifierEntries> FindClassifier(const fl::ModelState& layout);

// Which of `classes` classes the update's client holds with at least
// `min_examples` examples: a bool tensor of `classes` elements. Fails naming the
// missing extra, or a class beyond the classifier's rows.
absl::StatusOr<at::Tensor> ClassesHeld(const fl::ClientUpdate& update, int64_t classes,
                                       int64_t min_examples);

// Streams deltas in, O(P) memory.
class ClassAwareMean {
 public:
  explicit ClassAwareMean(ClassifierEntries classifier) : classifier_(classifier) {}

  // `held`: ClassesHeld's mask for this client. An error (and nothing added) when
  // the layout differs from the first delta's.
  absl::Status Add(const fl::ModelState& delta, const at::Tensor& held);

  int count() const { return count_; }
  const ClassifierEntries& classifier() const { return classifier_; }

  // global + the means. A class no client holds gets a zero row (and bias), as
  // the code leaves it. Integer buffers are rounded. FailedPrecondition when
  // nothing was added.
  absl::StatusOr<fl::ModelState> StepFrom(const fl::ModelState& global) const;

  // For distributed runs: the sums as "<prefix>sum/<entry name>" (integer entries
  // in float64), "<prefix>holders" (int64, per class) and "<prefix>count" (int64),
  // added to `sums`; zeros laid out as `global` when nothing was added.
  void AddPartialSums(absl::string_view prefix, const fl::ModelState& global,
                      NamedSums& sums) const;
  // Replaces the sums by the processes' summed AddPartialSums.
  // REQUIRES: `sums` passed CheckPartialSums against them.
  void MergePartialSums(absl::string_view prefix, const fl::ModelState& global,
                        const NamedSums& sums);

 private:
  ClassifierEntries classifier_;
  std::optional<fl::ModelState> sum_;  // the classifier's rows summed over holders only
  std::vector<at::ScalarType> dtypes_;  // the first delta's
  at::Tensor holders_;                 // per class, the clients holding it
  int count_ = 0;
};

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_CLASS_AWARE_MEAN_H_
