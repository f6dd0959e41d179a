// The client half of MA-Echo (aggregator "maecho" plans it): after local training,
// one pass over the client's training data in evaluation mode, in mini-batches of
// client.batch_size (shuffled by the hook's seed, as the code's loader), records
// the batch MEAN of every weight layer's input and feeds it to that layer's
// projector recursion (projection.h): one rank-1 update per batch for a linear
// layer; for a convolution, one per kernel-sized window of the batch-mean input
// map, taken at options.conv_window_stride with no padding (the code's treatment,
// whatever the layer's own stride and padding). A layer with a bias sees its input
// with a constant 1 appended, so its projector covers [weight | bias]; the code's
// models have no biases, where this changes nothing.
//
// The model must expose its layers (fl::Model::LayerInputs). The last layer (the
// classifier) gets no projector: MA-Echo aggregates it class-wise (so a model with
// one layer sends none, and MA-Echo is then the split average). The update
// carries the extra "maecho": one entry per projected layer, named "<weight>" or
// "<weight>|<bias>", holding the factor G of P = I - G G^T ({d, r}, r <= d), or only
// its top options.components principal components. bytes_up counts them.

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "absl/strings/str_cat.h"
#include "aggregators/maecho/maecho_options.pb.h"
#include "aggregators/maecho/projection.h"
#include "aggregators/maecho/projection_settings.h"
#include "fl/client_hook.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

constexpr char kExtra[] = "maecho";

class MaEchoHook : public fl::ClientHook {
 public:
  explicit MaEchoHook(ProjectionSettings settings) : settings_(settings) {}

  bool planned_only() const override { return true; }

  absl::Status AfterTraining(fl::HookContext& context, fl::ClientUpdate& update) override {
    try {
      return AfterTrainingUnguarded(context, update);
    } catch (const c10::Error& e) {
      return absl::InternalError(e.what_without_backtrace());
    }
  }

 private:
  // A layer's input rows for one batch: the batch mean, or its windows.
  at::Tensor Rows(const fl::Model::LayerInput& layer) const {
    const at::Tensor mean = layer.input.mean(0);
    at::Tensor rows = layer.kernel.empty()
                          ? mean.reshape({1, -1})
                          : ConvPatches(mean, layer.kernel, settings_.conv_window_stride);
    if (!layer.bias.empty()) rows = at::cat({rows, at::ones({rows.size(0), 1}, rows.options())}, 1);
    return rows;
  }

  absl::Status AfterTrainingUnguarded(fl::HookContext& context, fl::ClientUpdate& update) {
    fl::Model& model = *context.model;
    std::vector<int64_t> order = *context.train_indices;
    std::mt19937_64 rng(context.seed);
    std::shuffle(order.begin(), order.end(), rng);
    const at::Tensor all = at::tensor(order, at::kLong).to(context.examples->x.device());
    const int64_t batch = std::max<int64_t>(1, context.batch_size);

    at::NoGradGuard no_grad;
    const bool was_training = model.is_training();
    model.eval();
    std::vector<fl::Model::LayerInput> layout;
    std::vector<ProjectorRecursion> projectors;
    for (int64_t begin = 0; begin < all.size(0); begin += batch) {
      const at::Tensor x = context.examples->x.index_select(
          0, all.narrow(0, begin, std::min(batch, all.size(0) - begin)));
      FL_ASSIGN_OR_RETURN(std::vector<fl::Model::LayerInput> layers, model.LayerInputs(x));
      if (layers.empty()) return absl::FailedPreconditionError("the model reports no weight layers");
      layers.pop_back();  // the classifier
      if (projectors.empty()) {
        for (const fl::Model::LayerInput& layer : layers) {
          const at::Tensor rows = Rows(layer);
          projectors.emplace_back(rows.size(1), settings_.shrink,
                                  layer.kernel.empty() ? settings_.linear_regularizer
                                                       : settings_.conv_regularizer,
                                  rows);
        }
        layout = layers;
      }
      for (size_t l = 0; l < layers.size(); ++l) projectors[l].Update(Rows(layers[l]));
    }
    model.train(was_training);

    std::vector<fl::ModelState::Entry> entries;
    for (size_t l = 0; l < layout.size(); ++l) {
      const std::string name =
          layout[l].bias.empty() ? layout[l].weight : absl::StrCat(layout[l].weight, "|", layout[l].bias);
      at::Tensor factor = projectors[l].factor();
      if (settings_.components > 0) factor = TopComponents(factor, settings_.components);
      entries.push_back({name, factor.contiguous(), false});
    }
    update.extras[kExtra] = fl::ModelState(std::move(entries));
    return absl::OkStatus();
  }

  const ProjectionSettings settings_;
};

absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateMaEchoHook(
    const fedkit::aggregators::MaEchoProjectionOptions& options, const fl::ClientHook::CreateArgs&) {
  FL_ASSIGN_OR_RETURN(ProjectionSettings settings, ResolveProjection(options, "options"));
  return std::make_unique<MaEchoHook>(settings);
}

FL_REGISTER_PLUGIN(fl::ClientHook, "maecho", fedkit::aggregators::MaEchoProjectionOptions,
                   CreateMaEchoHook);

}  // namespace
}  // namespace aggregators
