// A client hook that reports how many training examples of each class the client
// holds, as the extra "class_counts" (one int64 entry "counts", one element per
// label up to the federation's largest). Class-aware one-shot aggregates use it:
// the split average and MA-Echo average each classifier row over the clients that
// hold that class, and MA-Echo's code knows a client's classes from its data split.
// It counts the client's whole share (the code's `splits`), before any other hook
// holds examples out. Aggregators "split_average" and "maecho" plan it.

#include <memory>

#include <ATen/ATen.h>

#include "aggregators/class_counts/class_counts_options.pb.h"
#include "aggregators/common/class_aware_mean.h"
#include "fl/client_hook.h"
#include "fl/registry.h"

namespace aggregators {
namespace {

class ClassCountsHook : public fl::ClientHook {
 public:
  absl::Status AfterTraining(fl::HookContext& context, fl::ClientUpdate& update) override {
    try {
      const at::Tensor& labels = context.examples->y;
      const at::Tensor share = at::tensor(*context.client_indices, at::kLong).to(labels.device());
      const int64_t labels_in_federation = labels.max().item<int64_t>() + 1;
      const at::Tensor counts = at::bincount(labels.index_select(0, share), {},
                                             labels_in_federation);
      update.extras[kClassCountsExtra] = fl::ModelState({{"counts", counts.to(at::kLong), false}});
      return absl::OkStatus();
    } catch (const c10::Error& e) {
      return absl::InternalError(e.what_without_backtrace());
    }
  }
};

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateClassCountsHook(
    const fedkit::aggregators::ClassCountsOptions&, const fl::ClientHook::CreateArgs&) {
  return std::make_unique<ClassCountsHook>();
}

FL_REGISTER_PLUGIN(fl::ClientHook, "class_counts", fedkit::aggregators::ClassCountsOptions,
                   CreateClassCountsHook);

}  // namespace
}  // namespace aggregators
