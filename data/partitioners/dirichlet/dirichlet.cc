// Dirichlet label skew (Yurochkin et al. 2019; Hsu et al. 2019): for every class,
// draw client proportions p ~ Dir(alpha * 1) and deal that class's examples out in
// those proportions. Repeated until every client holds at least min_size examples.
// Follows the partition code of MA-Echo / FedMA (`partition_data`, 'hetero-dir'),
// including its balance rule.
//
//   partition {
//     name: "dirichlet" num_clients: 100
//     options { [type.googleapis.com/fedkit.data.DirichletOptions] { alpha: 0.3 } }
//   }

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "data/partitioners/dirichlet/dirichlet_options.pb.h"
#include "fl/errors.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

class DirichletPartitioner : public fl::Partitioner {
 public:
  DirichletPartitioner(double alpha, int min_size, bool balance, int max_attempts)
      : alpha_(alpha), min_size_(min_size), balance_(balance), max_attempts_(max_attempts) {}

  absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(
      const fl::PartitionInput& input, int num_clients, std::mt19937_64& rng) const override {
    const absl::Span<const int64_t> labels = input.labels;
    const int64_t num_classes = input.num_classes;
    const auto n = static_cast<int64_t>(labels.size());
    if (static_cast<int64_t>(num_clients) * min_size_ > n) {
      return absl::InvalidArgumentError(absl::StrCat(
          num_clients, " clients with at least ", min_size_, " examples each need ",
          int64_t{num_clients} * min_size_, ", the training set has ", n));
    }
    std::vector<std::vector<int64_t>> by_class(num_classes);
    for (int64_t i = 0; i < n; ++i) by_class[labels[i]].push_back(i);

    std::gamma_distribution<double> gamma(alpha_, 1.0);
    for (int attempt = 0; attempt < max_attempts_; ++attempt) {
      std::vector<std::vector<int64_t>> shares(num_clients);
      for (std::vector<int64_t>& members : by_class) {
        std::shuffle(members.begin(), members.end(), rng);
        std::vector<double> p(num_clients);
        for (double& v : p) v = gamma(rng);
        if (balance_) {
          std::vector<double> kept(num_clients);
          for (int k = 0; k < num_clients; ++k) {
            kept[k] = static_cast<int64_t>(shares[k].size()) * num_clients < n ? p[k] : 0.0;
          }
          // When every client is full the rule would deal nothing; keep the draw.
          if (std::accumulate(kept.begin(), kept.end(), 0.0) > 0) p = kept;
        }
        const double total = std::accumulate(p.begin(), p.end(), 0.0);
        // Cut points at floor(cumsum(p) * |class|), as np.split does.
        const auto m = static_cast<int64_t>(members.size());
        double cumulative = 0.0;
        int64_t begin = 0;
        for (int k = 0; k < num_clients; ++k) {
          cumulative += p[k];
          const int64_t end = k + 1 == num_clients
                                  ? m
                                  : std::min<int64_t>(m, static_cast<int64_t>(cumulative / total * m));
          for (int64_t j = begin; j < end; ++j) shares[k].push_back(members[j]);
          begin = std::max(begin, end);
        }
      }
      const auto smallest = std::min_element(
          shares.begin(), shares.end(), [](const auto& a, const auto& b) { return a.size() < b.size(); });
      if (static_cast<int64_t>(smallest->size()) >= min_size_) {
        for (auto& share : shares) std::sort(share.begin(), share.end());
        return shares;
      }
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "no draw in ", max_attempts_, " attempts gave every client >= ", min_size_,
        " examples; raise alpha, lower min_size or use fewer clients"));
  }

 private:
  double alpha_;
  int min_size_;
  bool balance_;
  int max_attempts_;
};

absl::StatusOr<std::unique_ptr<fl::Partitioner>> CreateDirichlet(
    const fedkit::data::DirichletOptions& options, const fl::Partitioner::CreateArgs&) {
  fl::ErrorList errors;
  if (!(options.alpha() > 0) || !std::isfinite(options.alpha())) {
    errors.Add("options.alpha", absl::StrCat("must be > 0, got ", options.alpha()));
  }
  const int min_size = options.has_min_size() ? options.min_size() : 10;
  if (min_size < 1) errors.Add("options.min_size", absl::StrCat("must be >= 1, got ", min_size));
  const int max_attempts = options.has_max_attempts() ? options.max_attempts() : 1000;
  if (max_attempts < 1) {
    errors.Add("options.max_attempts", absl::StrCat("must be >= 1, got ", max_attempts));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<DirichletPartitioner>(
      options.alpha(), min_size, options.has_balance() ? options.balance() : true, max_attempts);
}

FL_REGISTER_PLUGIN(fl::Partitioner, "dirichlet", fedkit::data::DirichletOptions, CreateDirichlet);

}  // namespace
}  // namespace data
