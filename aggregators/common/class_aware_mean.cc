#include "aggregators/common/class_aware_mean.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/class_counts/class_counts_options.pb.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

// `held` shaped to scale the rows of a tensor of `dims` dimensions.
at::Tensor RowMask(const at::Tensor& held, int64_t dims, const at::Tensor& like) {
  std::vector<int64_t> shape(dims, 1);
  shape[0] = held.size(0);
  return held.to(like.options()).view(shape);
}

// Zeros laid out as `layout`, integer entries in float64: the sums' layout.
fl::ModelState ZeroSums(const fl::ModelState& layout) {
  fl::ModelState sums = layout.ZerosLike();
  for (auto& entry : sums.mutable_entries()) {
    if (!at::isFloatingType(entry.tensor.scalar_type())) entry.tensor = entry.tensor.to(at::kDouble);
  }
  return sums;
}

}  // namespace

fl::HookRequest ClassCountsRequest() {
  fl::HookRequest request{"class_counts", {}};
  request.options.PackFrom(fedkit::aggregators::ClassCountsOptions());
  return request;
}

absl::StatusOr<int64_t> ResolveMinClassExamples(std::optional<int32_t> option) {
  if (option.has_value() && *option < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.min_class_examples: must be >= 1, got ", *option));
  }
  return option.value_or(2);
}

absl::StatusOr<ClassifierEntries> FindClassifier(const fl::ModelState& layout) {
  const auto& entries = layout.entries();
  for (size_t i = entries.size(); i-- > 0;) {
    if (entries[i].is_buffer || entries[i].tensor.dim() < 2) continue;
    ClassifierEntries classifier;
    classifier.weight = i;
    classifier.classes = entries[i].tensor.size(0);
    for (size_t j = i + 1; j < entries.size(); ++j) {
      if (entries[j].is_buffer) continue;
      if (entries[j].tensor.dim() == 1 && entries[j].tensor.size(0) == classifier.classes) {
        classifier.bias = j;
      }
      break;
    }
    return classifier;
  }
  return absl::InvalidArgumentError(
      "the model has no parameter of 2 or more dimensions to take as its classifier");
}

absl::StatusOr<at::Tensor> ClassesHeld(const fl::ClientUpdate& update, int64_t classes,
                                       int64_t min_examples) {
  auto extra = update.extras.find(kClassCountsExtra);
  if (extra == update.extras.end() || extra->second.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the update lacks the extra \"", kClassCountsExtra,
        "\" (the \"class_counts\" client hook's per-class example counts)"));
  }
  const at::Tensor counts = extra->second.tensor(0).to(at::kCPU, at::kLong).flatten();
  if (counts.size(0) > classes && counts.narrow(0, classes, counts.size(0) - classes).any().item<bool>()) {
    return absl::InvalidArgumentError(absl::StrCat("the client holds labels beyond the classifier's ",
                                                   classes, " rows"));
  }
  at::Tensor held = at::zeros({classes}, at::kBool);
  const int64_t n = std::min<int64_t>(classes, counts.size(0));
  held.narrow(0, 0, n).copy_(counts.narrow(0, 0, n).ge(min_examples));
  return held;
}

absl::Status ClassAwareMean::Add(const fl::ModelState& delta, const at::Tensor& held) {
  if (sum_.has_value()) {
    // The sums hold integer buffers as doubles: compare names, shapes and the
    // first delta's dtypes.
    if (delta.size() != sum_->size()) {
      return absl::InvalidArgumentError(absl::StrCat("the delta has ", delta.size(),
                                                     " tensors, the first had ", sum_->size()));
    }
    for (size_t i = 0; i < delta.size(); ++i) {
      const auto& entry = delta.entries()[i];
      if (entry.name != sum_->entries()[i].name ||
          entry.tensor.sizes() != sum_->tensor(i).sizes() ||
          entry.tensor.scalar_type() != dtypes_[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tensor ", i, " \"", entry.name, "\" differs from the first delta's \"",
            sum_->entries()[i].name, "\" in name, shape or dtype"));
      }
    }
  } else {
    if (classifier_.weight >= delta.size() ||
        delta.tensor(classifier_.weight).size(0) != classifier_.classes) {
      return absl::InvalidArgumentError("the delta's layout does not match the classifier's");
    }
    sum_ = ZeroSums(delta);
    for (const auto& entry : delta.entries()) dtypes_.push_back(entry.tensor.scalar_type());
    holders_ = at::zeros({classifier_.classes}, at::kLong);
  }
  for (size_t i = 0; i < delta.size(); ++i) {
    at::Tensor term = delta.tensor(i);
    if (i == classifier_.weight || (classifier_.bias && i == *classifier_.bias)) {
      term = term * RowMask(held, term.dim(), term);
    }
    sum_->mutable_tensor(i).add_(term.to(sum_->tensor(i).scalar_type()));
  }
  holders_.add_(held.to(at::kLong));
  ++count_;
  return absl::OkStatus();
}

absl::StatusOr<fl::ModelState> ClassAwareMean::StepFrom(const fl::ModelState& global) const {
  if (!sum_.has_value()) return absl::FailedPreconditionError("no update was added");
  fl::ModelState result = global.Clone();
  for (size_t i = 0; i < result.size(); ++i) {
    at::Tensor& out = result.mutable_tensor(i);
    const at::Tensor& sum = sum_->tensor(i);
    if (i == classifier_.weight || (classifier_.bias && i == *classifier_.bias)) {
      const at::Tensor holders = holders_.to(out.device());
      const at::Tensor mask = RowMask(holders.gt(0), out.dim(), out);
      const at::Tensor divisor = RowMask(holders.clamp_min(1), out.dim(), out);
      out = (out + sum / divisor) * mask;
    } else if (at::isFloatingType(out.scalar_type())) {
      out.add_(sum / count_);
    } else {
      out.add_((sum / count_).round().to(out.scalar_type()));
    }
  }
  return result;
}

void ClassAwareMean::AddPartialSums(absl::string_view prefix, const fl::ModelState& global,
                                    NamedSums& sums) const {
  AddStateSums(absl::StrCat(prefix, "sum/"), sum_.has_value() ? *sum_ : ZeroSums(global), sums);
  sums[absl::StrCat(prefix, "holders")] =
      sum_.has_value() ? holders_ : at::zeros({classifier_.classes}, at::kLong);
  sums[absl::StrCat(prefix, "count")] = CountSum(count_);
}

void ClassAwareMean::MergePartialSums(absl::string_view prefix, const fl::ModelState& global,
                                      const NamedSums& sums) {
  sum_.reset();
  dtypes_.clear();
  holders_ = at::Tensor();
  count_ = static_cast<int>(sums.at(absl::StrCat(prefix, "count")).item<int64_t>());
  // No update on any process: as empty as one that saw none.
  if (count_ == 0) return;
  sum_ = StateFromSums(absl::StrCat(prefix, "sum/"), global, sums);
  for (const auto& entry : global.entries()) dtypes_.push_back(entry.tensor.scalar_type());
  holders_ = sums.at(absl::StrCat(prefix, "holders"));
}

}  // namespace aggregators
