// Krum and Multi-Krum (Blanchard, El Mhamdi, Guerraoui & Stainer, "Machine Learning
// with Adversaries: Byzantine Tolerant Gradient Descent", NeurIPS 2017), applied to
// the clients' model updates. With f the number of Byzantine clients assumed among
// the round's K, each update is scored by how tightly the honest majority could
// surround it:
//
//   s(i) = sum_{j in N_i} ||delta_i - delta_j||^2,
//
// N_i being the K - f - 2 updates nearest to delta_i (distances over all
// parameters, accumulated in float64; buffers excluded). Krum (m = 1) moves to the
// best-scored update, Multi-Krum to the plain mean of the m best-scored ones:
//
//   w <- w + eta * (1/m) sum_{i in best m} delta_i.
//
// Options: byzantine f (default 0), multi m (default 1) and server_lr eta (default
// 1). With f >= 1 a round needs K >= 2f + 3 (the paper's n > 2f + 2), else Finalize
// fails; with f = 0 any K is accepted (for K <= 2 every score is 0). The round also
// needs K >= m. Equal scores are broken by arrival order, the earliest update first
// (the server's cohort order): deterministic, but the result can then depend on the
// order, so the rule does not claim order invariance. Unweighted: num_examples is
// ignored. Diagnostic (m = 1): krum_selected, the chosen client's id.
//
// Memory: every update of the round is held until Finalize (K models, O(K P)), and
// scoring takes K (K - 1) / 2 passes over pairs of them. Buffers take the same
// selected clients' mean, never scaled by eta; integer buffers (num_batches_tracked)
// are rounded once, when added to the global model.
// Distributed runs gather the round's updates to one process (no partial sums).
//
//   aggregator {
//     name: "krum"
//     options { [type.googleapis.com/fedkit.aggregators.KrumOptions] { byzantine: 2 multi: 3 } }
//   }

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/krum/krum_options.pb.h"
#include "aggregators/common/held_updates.h"
#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace aggregators {
namespace {

// s(i) for every update, from the pairwise squared distances.
std::vector<double> Scores(const std::vector<fl::ClientUpdate>& updates, int byzantine) {
  const size_t k = updates.size();
  std::vector<std::vector<double>> squared(k, std::vector<double>(k, 0.0));
  for (size_t i = 0; i < k; ++i) {
    for (size_t j = i + 1; j < k; ++j) {
      squared[i][j] = squared[j][i] =
          fl::ModelState::Difference(updates[i].delta, updates[j].delta).SquaredNorm();
    }
  }
  const size_t reserved = static_cast<size_t>(byzantine) + 2;
  const size_t neighbours = k > reserved ? k - reserved : 0;
  std::vector<double> scores(k, 0.0);
  for (size_t i = 0; i < k; ++i) {
    std::vector<double> others;
    for (size_t j = 0; j < k; ++j) {
      if (j != i) others.push_back(squared[i][j]);
    }
    std::partial_sort(others.begin(), others.begin() + neighbours, others.end());
    scores[i] = std::accumulate(others.begin(), others.begin() + neighbours, 0.0);
  }
  return scores;
}

class Krum : public fl::Aggregator {
 public:
  Krum(int byzantine, int multi, double server_lr)
      : byzantine_(byzantine), multi_(multi), server_lr_(server_lr) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties;
    // Ties go to the earliest arrival (with K = 2 every round ties).
    properties.order_invariant = false;
    // One client passes Krum's checks only with f = 0 and m = 1, and is then chosen.
    properties.single_client_identity = byzantine_ == 0 && multi_ == 1 && server_lr_ == 1.0;
    return properties;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    update.extras.clear();  // the rule reads deltas only: hold no more than they
    return held_.Add(std::move(update));
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(std::vector<fl::ClientUpdate> updates, held_.Take(global));
    const int k = static_cast<int>(updates.size());
    const int64_t needed = 2 * int64_t{byzantine_} + 3;
    if (byzantine_ > 0 && k < needed) {
      return absl::FailedPreconditionError(
          absl::StrCat("options.byzantine: Krum with f = ", byzantine_,
                       " needs K >= 2f + 3 = ", needed, " updates in a round, got K = ", k));
    }
    if (k < multi_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "options.multi: Multi-Krum averages m = ", multi_, " updates, the round has K = ", k));
    }
    const std::vector<double> scores = Scores(updates, byzantine_);
    std::vector<int> ranked(k);
    std::iota(ranked.begin(), ranked.end(), 0);
    // Stable: of equal scores, the earlier arrival ranks first.
    std::stable_sort(ranked.begin(), ranked.end(),
                     [&](int a, int b) { return scores[a] < scores[b]; });
    std::vector<double> weights(k, 0.0);
    for (int r = 0; r < multi_; ++r) weights[ranked[r]] = 1.0;
    if (multi_ == 1) {
      context.diagnostics["krum_selected"] = static_cast<double>(updates[ranked[0]].client_id);
    }
    return fl::ModelState::Sum(global, server_lr_, 1.0, WeightedCombination(updates, weights));
  }

 private:
  const int byzantine_;
  const int multi_;
  const double server_lr_;
  HeldUpdates held_;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateKrum(
    const fedkit::aggregators::KrumOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  const int byzantine = options.has_byzantine() ? options.byzantine() : 0;
  if (byzantine < 0) {
    errors.Add("options.byzantine", absl::StrCat("must be >= 0, got ", byzantine));
  }
  const int multi = options.has_multi() ? options.multi() : 1;
  if (multi < 1) errors.Add("options.multi", absl::StrCat("must be >= 1, got ", multi));
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  if (!(server_lr > 0) || !std::isfinite(server_lr)) {
    errors.Add("options.server_lr", absl::StrCat("must be > 0, got ", server_lr));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<Krum>(byzantine, multi, server_lr);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "krum", fedkit::aggregators::KrumOptions, CreateKrum);
FL_CONFORMANCE_REASON("krum", kNoPartialSums,
                      "each update is scored by its distances to the others and whole updates "
                      "are chosen: the rule needs every update");

}  // namespace
}  // namespace aggregators
