// A client hook that holds a fixed share of every client's training data out of
// local training, as FedLAW's official code does (nodes.py train_val_split,
// client_valid_ratio = 0.3: a client-side validation split that is never trained
// on). On a client's first round the hook draws floor(fraction * n) of the n
// examples of the client's whole share at random (from the hook's seed, so the
// draw depends on the spec's seed and differs across clients) and keeps them in
// the client's hook state; in every round it removes those examples from the
// training indices, so local training and the update's num_examples cover the
// rest only. Drawn from the whole share, it composes with other hooks that hold
// examples out (Elastic's B_k) in any order.
//
// It lives with the aggregators because it is a client hook; aggregator "fedlaw"
// plans it (options.client_holdout_fraction), and any spec can add it:
//
//   client { hooks { name: "holdout"
//                    options { [type.googleapis.com/fedkit.aggregators.HoldoutOptions] { fraction: 0.3 } } } }

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/common/held_out.h"
#include "aggregators/holdout/holdout_options.pb.h"
#include "fl/client_hook.h"
#include "fl/registry.h"

namespace aggregators {
namespace {

constexpr char kHeldOut[] = "held_out";
constexpr double kDefaultFraction = 0.3;

class HoldoutHook : public fl::ClientHook {
 public:
  explicit HoldoutHook(double fraction) : fraction_(fraction) {}

  absl::Status BeforeTraining(fl::HookContext& context) override {
    try {
      return BeforeTrainingUnguarded(context);
    } catch (const c10::Error& e) {
      return absl::InternalError(e.what_without_backtrace());
    }
  }

 private:
  absl::Status BeforeTrainingUnguarded(fl::HookContext& context) {
    const std::vector<int64_t>& share = *context.client_indices;
    fl::TensorMap& state = *context.state;
    auto it = state.find(kHeldOut);
    if (it == state.end()) {
      std::vector<int64_t> shuffled = share;
      std::mt19937_64 rng(context.seed);
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      const auto count = static_cast<int64_t>(
          std::floor(fraction_ * static_cast<double>(shuffled.size())));
      std::vector<int64_t> held(shuffled.begin(), shuffled.begin() + count);
      std::sort(held.begin(), held.end());
      it = state.emplace(kHeldOut, at::tensor(held, at::kLong)).first;
    }
    return RemoveHeldOut(it->second, share, *context.train_indices);
  }

  const double fraction_;
};

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateHoldoutHook(
    const fedkit::aggregators::HoldoutOptions& options, const fl::ClientHook::CreateArgs&) {
  const double fraction = options.has_fraction() ? options.fraction() : kDefaultFraction;
  if (!(fraction >= 0 && fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.fraction: must be in [0, 1), got ", fraction));
  }
  return std::make_unique<HoldoutHook>(fraction);
}

FL_REGISTER_PLUGIN(fl::ClientHook, "holdout", fedkit::aggregators::HoldoutOptions,
                   CreateHoldoutHook);

}  // namespace
}  // namespace aggregators
