// MA-Echo (Su, Li, Xue, "One-shot Federated Learning without Server-side
// Training", Neural Networks 2023), as its official code computes it (the code
// produced the published numbers; docs/maecho.md lists where it and the paper
// differ).
//
// Each client sends its model V_i, the classes it holds ("class_counts" hook) and,
// for every layer but the classifier, its projection matrix P_i ("maecho" hook,
// maecho_hook.cc: P_i = I - G_i G_i^T, near 0 along the inputs the client's data
// excites, 1 where its data is silent). For a layer with a bias, the matrices act
// on [weight | bias]. The server starts the anchor W at the uniform mean of the V_i
// and repeats `iterations` times, layer by layer in forward order:
//   D   = step * sum_i alpha_i (W - V_i)(P_i - I)      (alpha_i = 1/N, or the QP's)
//   W  <- W + D
//   V_i <- V_i + step * Norm((W - V_i) P_i)           (with the W just updated)
// so W moves toward each client inside the subspace that client's data excites
// and each V_i moves toward W inside its own null space, where its outputs on its
// data barely change. The classifier is never iterated: it is averaged class-wise
// (each class's row over the clients holding that class). The result (option
// `output`) is the split average of the final V_i (the code) or the anchor W (the
// paper's Algorithm 1). With `align: OT` the clients' hidden neurons are first
// matched to the first client's by OT fusion's alignment, their projections
// reordered with them (the paper's "MA-Echo + OT"; the code recomputes the
// projections of the aligned models, which is the same reordering).
//
// The paper's form differs in constants (D with a factor 2 and P_i in place of
// I - P_i, the V-step with I - P_i / 2) and solves alpha per layer and iteration
// from a small QP (Eq. 6; `weights: QP`, with the code's formulation of it: the
// code ships the QP but fixes alpha = 1/N); the code's recursion for P and its
// step are what reproduce the published numbers. Norm divides each row by its norm
// plus 1e-12: the code divides by the norm alone, which turns a zero row into NaN.
// maecho_official_test checks the code's form (alpha = 1/N, either output, with and
// without Norm) against the code's own output on the same client models.
//
// Memory: every client model and its factors are kept until Finalize,
// O(N (P + sum_l d_l r_l)); a factor with more than d/2 columns is expanded to the
// d x d matrix once, so the server holds at most O(N sum_l d_l^2). Diagnostics:
// objective_start / objective_end (and objective_iter_<t> every trace_every
// iterations): sum over layers and clients of |(W - V_i0)(I - P_i)|_F^2; with
// trace_accuracy, the test accuracy of the aggregate at those iterations too
// (accuracy_iter_<t>, from ServerContext::test_accuracy).
// Distributed runs gather the round's updates to one process (no partial sums).
//
//   aggregator {
//     name: "maecho"
//     options { [type.googleapis.com/fedkit.aggregators.MaEchoOptions] { iterations: 60 step: 1.6 } }
//   }

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "aggregators/common/class_aware_mean.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/common/ot_alignment.h"
#include "aggregators/maecho/maecho_options.pb.h"
#include "aggregators/maecho/projection_settings.h"
#include "aggregators/maecho/qp_weights.h"
#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

using fedkit::aggregators::MaEchoOptions;

constexpr char kExtra[] = "maecho";

// P = I - G G^T applied from the right, M P, as the factor or as the dense matrix.
class Projector {
 public:
  explicit Projector(const at::Tensor& factor) {
    if (2 * factor.size(1) > factor.size(0)) {
      dense_ = at::eye(factor.size(0), factor.options()) - at::mm(factor, factor.t());
    } else {
      factor_ = factor;
    }
  }
  at::Tensor Apply(const at::Tensor& m) const {
    if (dense_.defined()) return at::mm(m, dense_);
    return m - at::mm(at::mm(m, factor_), factor_.t());
  }

 private:
  at::Tensor factor_, dense_;
};

// A projected layer: its weight (and bias) entries in the model's layout.
struct Layer {
  std::string extra_name;
  size_t weight = 0;
  std::optional<size_t> bias;
};

struct ClientModel {
  fl::ModelState model;          // the client's delta until Finalize
  at::Tensor held;               // classes held
  std::vector<at::Tensor> factors;  // per Layer: G with P = I - G G^T
  std::vector<Projector> projectors;  // made from the factors in Finalize
};

class MaEcho : public fl::Aggregator {
 public:
  explicit MaEcho(const MaEchoOptions& options)
      : options_(options),
        iterations_(options.has_iterations() ? options.iterations() : 50),
        step_(options.has_step() ? options.step() : 1.6),
        min_class_examples_(options.has_min_class_examples() ? options.min_class_examples() : 2),
        qp_bound_(options.has_qp_bound() ? options.qp_bound() : 0.5) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    // A class the only client lacks gets a zero classifier row.
    properties.single_client_identity = false;
    properties.client_hooks = {"class_counts", "maecho"};
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext&) override {
    FL_ASSIGN_OR_RETURN(classifier_, FindClassifier(global));
    layout_ = global;  // shares the tensors: only the layout is read
    clients_.clear();
    layers_.clear();
    fl::RoundPlan plan;
    google::protobuf::Any projection;
    projection.PackFrom(options_.projection());
    plan.hooks.push_back(ClassCountsRequest());
    plan.hooks.push_back({"maecho", projection});
    return plan;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext&) override {
    FL_RETURN_IF_ERROR(layout_.CheckSameLayout(update.delta));
    FL_ASSIGN_OR_RETURN(at::Tensor held,
                        ClassesHeld(update, classifier_.classes, min_class_examples_));
    auto extra = update.extras.find(kExtra);
    if (extra == update.extras.end()) {
      return absl::InvalidArgumentError(
          "the update lacks the extra \"maecho\" (the maecho client hook's projections)");
    }
    const fl::ModelState& factors = extra->second;
    if (clients_.empty()) {
      FL_ASSIGN_OR_RETURN(layers_, LayersOf(update.delta, factors));
    }
    if (factors.size() != layers_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the extra \"maecho\" has ", factors.size(),
                                                     " layers, the first client's ",
                                                     layers_.size()));
    }
    ClientModel client;
    for (size_t l = 0; l < layers_.size(); ++l) {
      const auto& entry = factors.entries()[l];
      const int64_t d = Width(update.delta, layers_[l]);
      if (entry.name != layers_[l].extra_name || entry.tensor.dim() != 2 ||
          entry.tensor.size(0) != d) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the extra \"maecho\" entry ", l, " is \"", entry.name, "\" of shape ",
            c10::str(entry.tensor.sizes()), "; expected \"", layers_[l].extra_name, "\" with ", d,
            " rows"));
      }
      client.factors.push_back(entry.tensor.to(update.delta.tensor(layers_[l].weight).dtype()));
    }
    client.held = held;
    client.model = std::move(update.delta);
    clients_.push_back(std::move(client));
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    if (clients_.empty()) return absl::FailedPreconditionError("no update was accumulated");
    if (options_.align() == MaEchoOptions::OT) FL_RETURN_IF_ERROR(AlignToFirstClient(global));
    for (ClientModel& client : clients_) {
      for (const at::Tensor& factor : client.factors) client.projectors.emplace_back(factor);
      client.factors.clear();
    }
    const auto n = static_cast<double>(clients_.size());
    // Each client's V_i as one matrix per layer; `clients_[i].model` holds its delta.
    std::vector<std::vector<at::Tensor>> v(clients_.size());
    std::vector<std::vector<at::Tensor>> v0(clients_.size());
    std::vector<at::Tensor> w(layers_.size());
    for (size_t i = 0; i < clients_.size(); ++i) {
      for (size_t l = 0; l < layers_.size(); ++l) {
        at::Tensor matrix = Matrix(global, layers_[l]) + Matrix(clients_[i].model, layers_[l]);
        v0[i].push_back(matrix);
        v[i].push_back(matrix.clone());
        w[l] = i == 0 ? matrix.clone() : w[l] + matrix;
      }
    }
    for (at::Tensor& anchor : w) anchor.div_(n);

    auto objective = [&] {
      double total = 0.0;
      for (size_t i = 0; i < clients_.size(); ++i) {
        for (size_t l = 0; l < layers_.size(); ++l) {
          const at::Tensor m = w[l] - v0[i][l];
          total += (m - clients_[i].projectors[l].Apply(m)).square().sum().item<double>();
        }
      }
      return total;
    };
    // The aggregate from the current V_i and W.
    auto output = [&]() -> absl::StatusOr<fl::ModelState> {
      ClassAwareMean mean(classifier_);
      for (size_t i = 0; i < clients_.size(); ++i) {
        fl::ModelState delta = clients_[i].model;  // SetMatrix replaces, never writes into
        for (size_t l = 0; l < layers_.size(); ++l) {
          SetMatrix(v[i][l] - Matrix(global, layers_[l]), layers_[l], delta);
        }
        FL_RETURN_IF_ERROR(mean.Add(delta, clients_[i].held));
      }
      FL_ASSIGN_OR_RETURN(fl::ModelState result, mean.StepFrom(global));
      if (options_.output() == MaEchoOptions::ANCHOR) {
        for (size_t l = 0; l < layers_.size(); ++l) SetMatrix(w[l], layers_[l], result);
      }
      return result;
    };
    context.diagnostics["objective_start"] = objective();
    std::vector<double> alpha(clients_.size(), 1.0 / n);
    std::vector<at::Tensor> z(clients_.size());
    for (int t = 1; t <= iterations_; ++t) {
      for (size_t l = 0; l < layers_.size(); ++l) {
        for (size_t i = 0; i < clients_.size(); ++i) {
          const at::Tensor m = w[l] - v[i][l];
          z[i] = clients_[i].projectors[l].Apply(m) - m;  // (W - V_i)(P_i - I)
        }
        if (options_.weights() == MaEchoOptions::QP) {
          const at::Tensor flat = at::stack(z).flatten(1).to(at::kDouble);
          FL_ASSIGN_OR_RETURN(alpha, SimplexBoxQp(at::mm(flat, flat.t()), qp_bound_));
        }
        at::Tensor d = at::zeros_like(w[l]);
        for (size_t i = 0; i < clients_.size(); ++i) d.add_(z[i], alpha[i]);
        w[l].add_(d, step_);
        for (size_t i = 0; i < clients_.size(); ++i) {
          at::Tensor u = clients_[i].projectors[l].Apply(w[l] - v[i][l]);
          if (options_.normalize_rows()) u.div_(u.norm(2, {1}, true).add_(1e-12));
          v[i][l].add_(u, step_);
        }
      }
      if (options_.trace_every() > 0 && t % options_.trace_every() == 0) {
        context.diagnostics[absl::StrFormat("objective_iter_%03d", t)] = objective();
        if (options_.trace_accuracy()) {
          if (!context.test_accuracy) {
            return absl::FailedPreconditionError(
                "options.trace_accuracy: this server lends no test evaluation");
          }
          FL_ASSIGN_OR_RETURN(fl::ModelState current, output());
          FL_ASSIGN_OR_RETURN(context.diagnostics[absl::StrFormat("accuracy_iter_%03d", t)],
                              context.test_accuracy(current));
        }
      }
    }
    context.diagnostics["objective_end"] = objective();
    FL_ASSIGN_OR_RETURN(fl::ModelState result, output());
    clients_.clear();
    return result;
  }

 private:
  // Reorders every client's hidden neurons to match the first client's (OT fusion's
  // alignment), and the rows of the factors acting on those neurons with them.
  absl::Status AlignToFirstClient(const fl::ModelState& global) {
    FL_ASSIGN_OR_RETURN(std::vector<ChainLayer> chain, LinearChain(global));
    const fl::ModelState reference = fl::ModelState::Sum(global, 1.0, 1.0, clients_[0].model);
    for (size_t i = 1; i < clients_.size(); ++i) {
      ClientModel& client = clients_[i];
      const fl::ModelState model = fl::ModelState::Sum(global, 1.0, 1.0, client.model);
      const std::vector<at::Tensor> matches = AlignNeurons(reference, model, chain);
      client.model = fl::ModelState::Difference(PermuteNeurons(model, chain, matches), global);
      for (size_t l = 0; l < layers_.size(); ++l) {
        size_t position = 0;
        while (chain[position].weight != layers_[l].weight) ++position;
        if (position == 0) continue;  // the model's inputs keep their order
        at::Tensor rows = matches[position - 1];
        if (layers_[l].bias.has_value()) {
          rows = at::cat({rows, at::full({1}, rows.size(0), rows.options())});
        }
        client.factors[l] = client.factors[l].index_select(0, rows.to(client.factors[l].device()));
      }
    }
    return absl::OkStatus();
  }

  // The projected layers named by the first client's extra, checked against the layout.
  static absl::StatusOr<std::vector<Layer>> LayersOf(const fl::ModelState& layout,
                                                     const fl::ModelState& factors) {
    auto index_of = [&layout](const std::string& name) -> std::optional<size_t> {
      for (size_t i = 0; i < layout.size(); ++i) {
        if (layout.entries()[i].name == name && !layout.entries()[i].is_buffer) return i;
      }
      return std::nullopt;
    };
    std::vector<Layer> layers;
    for (const auto& entry : factors.entries()) {
      const std::vector<std::string> names = absl::StrSplit(entry.name, '|');
      Layer layer{entry.name};
      std::optional<size_t> weight = index_of(names[0]);
      if (!weight.has_value() || layout.tensor(*weight).dim() < 2 || names.size() > 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            "the extra \"maecho\" names \"", entry.name, "\", not a weight of the model"));
      }
      layer.weight = *weight;
      if (names.size() == 2) {
        layer.bias = index_of(names[1]);
        if (!layer.bias.has_value() ||
            layout.tensor(*layer.bias).numel() != layout.tensor(*weight).size(0)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the extra \"maecho\" names \"", names[1], "\", not the bias of \"", names[0], "\""));
        }
      }
      layers.push_back(layer);
    }
    return layers;
  }

  // The layer's input width d, with the bias's constant input.
  static int64_t Width(const fl::ModelState& layout, const Layer& layer) {
    const at::Tensor& weight = layout.tensor(layer.weight);
    return weight.numel() / weight.size(0) + (layer.bias.has_value() ? 1 : 0);
  }

  // [weight (out x d) | bias] of `state`.
  static at::Tensor Matrix(const fl::ModelState& state, const Layer& layer) {
    const at::Tensor& weight = state.tensor(layer.weight);
    at::Tensor matrix = weight.reshape({weight.size(0), -1});
    if (layer.bias.has_value()) {
      matrix = at::cat({matrix, state.tensor(*layer.bias).reshape({-1, 1})}, 1);
    }
    return matrix;
  }

  static void SetMatrix(const at::Tensor& matrix, const Layer& layer, fl::ModelState& state) {
    at::Tensor& weight = state.mutable_tensor(layer.weight);
    const int64_t columns = weight.numel() / weight.size(0);
    weight = matrix.narrow(1, 0, columns).reshape(weight.sizes()).clone();
    if (layer.bias.has_value()) {
      at::Tensor& bias = state.mutable_tensor(*layer.bias);
      bias = matrix.narrow(1, columns, 1).reshape(bias.sizes()).clone();
    }
  }

  const MaEchoOptions options_;
  const int iterations_;
  const double step_;
  const int64_t min_class_examples_;
  const double qp_bound_;
  ClassifierEntries classifier_;
  fl::ModelState layout_;
  std::vector<Layer> layers_;
  std::vector<ClientModel> clients_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateMaEcho(const MaEchoOptions& options,
                                                            const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  if (options.has_iterations() && options.iterations() < 1) {
    errors.Add("options.iterations", absl::StrCat("must be >= 1, got ", options.iterations()));
  }
  if (options.has_step() && (!(options.step() > 0) || !std::isfinite(options.step()))) {
    errors.Add("options.step", absl::StrCat("must be > 0, got ", options.step()));
  }
  if (options.has_min_class_examples() && options.min_class_examples() < 1) {
    errors.Add("options.min_class_examples",
               absl::StrCat("must be >= 1, got ", options.min_class_examples()));
  }
  if (options.has_qp_bound() && !(options.qp_bound() > 0 && options.qp_bound() <= 1)) {
    errors.Add("options.qp_bound", absl::StrCat("must be in (0, 1], got ", options.qp_bound()));
  }
  if (options.trace_every() < 0) {
    errors.Add("options.trace_every", absl::StrCat("must be >= 0, got ", options.trace_every()));
  }
  // The hook's options, checked here so that a bad spec fails before training.
  absl::StatusOr<ProjectionSettings> projection =
      ResolveProjection(options.projection(), "options.projection");
  if (!projection.ok()) errors.AddStatus("", projection.status());
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<MaEcho>(options);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "maecho", MaEchoOptions, CreateMaEcho);
FL_CONFORMANCE_REASON("maecho", kNoPartialSums,
                      "its iterations move every client model inside that client's own "
                      "projection subspaces: it needs every model and projector");

}  // namespace
}  // namespace aggregators
