#include "aggregators/common/ot_alignment.h"

#include <lemon/network_simplex.h>
#include <lemon/smart_graph.h>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "absl/strings/str_cat.h"

namespace aggregators {

absl::StatusOr<std::vector<ChainLayer>> LinearChain(const fl::ModelState& layout) {
  std::vector<ChainLayer> chain;
  const auto& entries = layout.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].is_buffer) continue;
    const at::Tensor& t = entries[i].tensor;
    if (t.dim() == 2) {
      if (!chain.empty() && layout.tensor(chain.back().weight).size(0) != t.size(1)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "\"", entries[i].name, "\" takes ", t.size(1), " inputs but the layer before gives ",
            layout.tensor(chain.back().weight).size(0),
            ": OT alignment needs a chain of linear layers"));
      }
      chain.push_back({i, std::nullopt});
    } else if (t.dim() == 1 && !chain.empty() && !chain.back().bias.has_value() &&
               t.size(0) == layout.tensor(chain.back().weight).size(0)) {
      chain.back().bias = i;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", entries[i].name, "\" of shape ", c10::str(t.sizes()),
                       " is not part of a chain of linear layers, which OT alignment needs"));
    }
  }
  if (chain.empty()) return absl::InvalidArgumentError("the model has no linear layer");
  return chain;
}

std::vector<int64_t> MinCostAssignment(const at::Tensor& cost) {
  TORCH_CHECK(cost.dim() == 2 && cost.size(0) == cost.size(1), "a square cost matrix expected");
  const int64_t n = cost.size(0);
  const at::Tensor c = cost.to(at::kCPU, at::kDouble).contiguous();
  const double* costs = c.data_ptr<double>();
  lemon::SmartDigraph graph;
  std::vector<lemon::SmartDigraph::Node> rows, columns;
  for (int64_t i = 0; i < n; ++i) rows.push_back(graph.addNode());
  for (int64_t i = 0; i < n; ++i) columns.push_back(graph.addNode());
  lemon::SmartDigraph::ArcMap<double> arc_cost(graph);
  lemon::SmartDigraph::NodeMap<int> supply(graph);
  for (int64_t i = 0; i < n; ++i) {
    supply[rows[i]] = 1;
    supply[columns[i]] = -1;
    for (int64_t j = 0; j < n; ++j) arc_cost[graph.addArc(rows[i], columns[j])] = costs[i * n + j];
  }
  using Simplex = lemon::NetworkSimplex<lemon::SmartDigraph, int, double>;
  Simplex simplex(graph);
  simplex.costMap(arc_cost).supplyMap(supply);
  TORCH_CHECK(simplex.run() == Simplex::OPTIMAL, "network simplex found no optimal assignment");
  std::vector<int64_t> match(n, -1);
  for (lemon::SmartDigraph::ArcIt arc(graph); arc != lemon::INVALID; ++arc) {
    if (simplex.flow(arc) > 0) {
      match[graph.id(graph.target(arc)) - n] = graph.id(graph.source(arc));
    }
  }
  return match;
}

namespace {

// Layer l's incoming weights (and bias) as rows.
at::Tensor Rows(const fl::ModelState& state, const ChainLayer& layer) {
  at::Tensor rows = state.tensor(layer.weight);
  if (layer.bias.has_value()) rows = at::cat({rows, state.tensor(*layer.bias).unsqueeze(1)}, 1);
  return rows;
}

}  // namespace

std::vector<at::Tensor> AlignNeurons(const fl::ModelState& reference, const fl::ModelState& model,
                                     const std::vector<ChainLayer>& chain) {
  std::vector<at::Tensor> matches;
  fl::ModelState aligned = model;  // tensors replaced, never changed in place
  for (size_t l = 0; l + 1 < chain.size(); ++l) {
    const at::Tensor ref = Rows(reference, chain[l]).to(at::kDouble);
    const at::Tensor own = Rows(aligned, chain[l]).to(at::kDouble);
    // cost[m][r]: the model's neuron m against the reference's r.
    const std::vector<int64_t> match = MinCostAssignment(at::cdist(own, ref));
    matches.push_back(at::tensor(match, at::kLong).to(model.tensor(chain[l].weight).device()));
    aligned = PermuteNeurons(aligned, {chain[l], chain[l + 1]}, {matches.back()});
  }
  return matches;
}

fl::ModelState PermuteNeurons(const fl::ModelState& model, const std::vector<ChainLayer>& chain,
                              const std::vector<at::Tensor>& matches) {
  fl::ModelState permuted = model;
  for (size_t l = 0; l < matches.size(); ++l) {
    const at::Tensor& match = matches[l];
    at::Tensor& weight = permuted.mutable_tensor(chain[l].weight);
    weight = weight.index_select(0, match);
    if (chain[l].bias.has_value()) {
      at::Tensor& bias = permuted.mutable_tensor(*chain[l].bias);
      bias = bias.index_select(0, match);
    }
    at::Tensor& next = permuted.mutable_tensor(chain[l + 1].weight);
    next = next.index_select(1, match);
  }
  return permuted;
}

}  // namespace aggregators
