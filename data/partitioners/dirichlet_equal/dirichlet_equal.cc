// Equal-size Dirichlet label skew, as FedExP partitions CIFAR / CINIC / (F)MNIST
// (Jhunjhunwala et al., ICLR 2023; code: Divyansh03/FedExP, util_data.py,
// `getDirichletData_equal`). Every client k draws its own class prior
// p_k ~ Dir(alpha * 1_K); then examples are dealt one at a time: pick a client
// uniformly among those not yet full, draw a class from that client's prior and give
// the client one not-yet-used example of that class, until every client holds
// exactly m = floor(N / num_clients) examples. Unlike "dirichlet" (a Dirichlet over
// clients per class, so sizes vary), client sizes are equal and the skew lives in
// each client's label mix. The N mod num_clients examples left over are unused.
//
//   partition {
//     name: "dirichlet_equal" num_clients: 100
//     options { [type.googleapis.com/fedkit.data.DirichletEqualOptions] { alpha: 0.3 } }
//   }
//
// Where we match the original code and where we deliberately do not:
//  * Client choice: the original draws a client uniformly among all of them and
//    skips full ones, which is a uniform draw among the clients not yet full; we make
//    that draw directly.
//  * Exhausted classes: the original redraws the class from the client's prior until
//    it hits one that still has examples (its inner `while True`), i.e. rejection
//    sampling, which is exactly a draw from the prior renormalised over the classes
//    that still have examples. We draw from that renormalised prior directly, so the
//    distribution is the same but the cost per example is O(K) however little mass
//    is left on the remaining classes.
//  * A prior with no mass left on any remaining class (all of it on exhausted classes):
//    the original loops forever. Ours (not in the original): draw uniformly among the
//    classes that still have examples.
//  * Tiny alpha (below ~1e-3) can make every gamma draw of a client underflow to 0,
//    leaving no prior at all (numpy would not produce such a draw). Ours: such a
//    client's prior is a point mass on a uniformly random class, the alpha -> 0 limit
//    of Dir(alpha * 1) that the underflow stands for.
//  * Which example of the drawn class: the original takes each class's examples in
//    index order; we take a uniformly random unused one (each class pool is shuffled
//    once), so an ordered training file cannot leak its order into the clients.
//  * Each client's indices are returned sorted (the original shuffles them), as every
//    partitioner here does; their order carries no meaning.
//  * The original picks the class with argmax(u <= cdf), which falls back to class 0
//    when rounding leaves cdf[K-1] < u; we do not reproduce that.
// Randomness comes only from the rng passed to Partition, in this order: the client
// priors (client by client, K gamma draws each), the class pools, then the dealing.

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "data/partitioners/dirichlet_equal/dirichlet_equal_options.pb.h"
#include "fl/errors.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

class DirichletEqualPartitioner : public fl::Partitioner {
 public:
  explicit DirichletEqualPartitioner(double alpha) : alpha_(alpha) {}

  absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(
      const fl::PartitionInput& input, int num_clients, std::mt19937_64& rng) const override {
    const absl::Span<const int64_t> labels = input.labels;
    const int64_t num_classes = input.num_classes;
    const auto n = static_cast<int64_t>(labels.size());
    if (num_clients < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_clients: must be >= 1, got ", num_clients));
    }
    if (num_clients > n) {
      return absl::InvalidArgumentError(
          absl::StrCat(num_clients, " clients but only ", n, " training examples"));
    }
    for (int64_t i = 0; i < n; ++i) {
      if (labels[i] < 0 || labels[i] >= num_classes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "labels[", i, "]: must be in [0, ", num_classes, "), got ", labels[i]));
      }
    }
    const int64_t k_classes = num_classes;

    // prior[k * K + c]: client k's unnormalised weight on class c. Only ratios
    // matter, since every draw renormalises over the classes still available.
    std::vector<double> prior(static_cast<size_t>(num_clients) * k_classes);
    std::gamma_distribution<double> gamma(alpha_, 1.0);
    for (int k = 0; k < num_clients; ++k) {
      double* p = &prior[static_cast<size_t>(k) * k_classes];
      double total = 0.0;
      for (int64_t c = 0; c < k_classes; ++c) total += p[c] = gamma(rng);
      if (!(total > 0)) {
        p[std::uniform_int_distribution<int64_t>(0, k_classes - 1)(rng)] = 1.0;
      }
    }

    std::vector<std::vector<int64_t>> pools(k_classes);
    for (int64_t i = 0; i < n; ++i) pools[labels[i]].push_back(i);
    for (std::vector<int64_t>& pool : pools) std::shuffle(pool.begin(), pool.end(), rng);
    // Classes with examples left, ascending (the original's cdf order).
    std::vector<int64_t> available;
    for (int64_t c = 0; c < k_classes; ++c) {
      if (!pools[c].empty()) available.push_back(c);
    }

    const int64_t m = n / num_clients;
    std::vector<std::vector<int64_t>> shares(num_clients);
    for (auto& share : shares) share.reserve(m);
    std::vector<int> open(num_clients);  // clients not yet full
    std::iota(open.begin(), open.end(), 0);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    // m * num_clients <= n, so `available` is never empty while a client is open.
    while (!open.empty()) {
      const size_t slot =
          std::uniform_int_distribution<size_t>(0, open.size() - 1)(rng);
      const int client = open[slot];
      const double* p = &prior[static_cast<size_t>(client) * k_classes];

      double mass = 0.0;
      for (int64_t c : available) mass += p[c];
      size_t pick = available.size();
      if (mass > 0) {
        const double target = uniform(rng) * mass;
        double cumulative = 0.0;
        size_t last_positive = 0;
        for (size_t j = 0; j < available.size(); ++j) {
          const double w = p[available[j]];
          if (w <= 0) continue;
          last_positive = j;
          cumulative += w;
          if (cumulative > target) {
            pick = j;
            break;
          }
        }
        // Rounding can leave the running sum just below target.
        if (pick == available.size()) pick = last_positive;
      } else {
        pick = std::uniform_int_distribution<size_t>(0, available.size() - 1)(rng);
      }

      std::vector<int64_t>& pool = pools[available[pick]];
      shares[client].push_back(pool.back());
      pool.pop_back();
      if (pool.empty()) available.erase(available.begin() + pick);
      if (static_cast<int64_t>(shares[client].size()) == m) {
        open[slot] = open.back();
        open.pop_back();
      }
    }
    for (auto& share : shares) std::sort(share.begin(), share.end());
    return shares;
  }

 private:
  double alpha_;
};

absl::StatusOr<std::unique_ptr<fl::Partitioner>> CreateDirichletEqual(
    const fedkit::data::DirichletEqualOptions& options, const fl::Partitioner::CreateArgs&) {
  fl::ErrorList errors;
  if (!(options.alpha() > 0)) {
    errors.Add("options.alpha", absl::StrCat("must be > 0, got ", options.alpha()));
  } else if (!std::isfinite(options.alpha())) {
    errors.Add("options.alpha", absl::StrCat("must be finite, got ", options.alpha()));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<DirichletEqualPartitioner>(options.alpha());
}

FL_REGISTER_PLUGIN(fl::Partitioner, "dirichlet_equal", fedkit::data::DirichletEqualOptions,
                   CreateDirichletEqual);

}  // namespace
}  // namespace data
