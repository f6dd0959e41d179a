// Unbalanced IID partition: labels are IID (a uniformly random split), client sizes
// are heavy-tailed. This is the "unbalanced data across clients" setting of the
// Elastic Aggregation paper (Chen et al., CVPR 2023, its MNIST / EMNIST / CIFAR-10 /
// CINIC-10 rows) and the size model of LEAF (Caldas et al. 2018) and FedProx's
// synthetic data (Li et al., MLSys 2020: sizes lognormal(4, 2)).
//
// Client k draws a weight w_k, log-normal (w = exp(sigma z), z ~ N(0, 1)) or power
// law (w = U^(-1 / (exponent - 1)), U ~ Uniform(0, 1], a Pareto on [1, inf) with
// density proportional to w^-exponent). It gets min_size examples plus a share of
// the other N - num_clients * min_size in proportion to w_k, rounded by largest
// remainder, so every example is used. The examples themselves are a uniformly
// random permutation dealt out in those sizes. Weights are drawn in client order,
// then the permutation, from the rng passed to Partition.
//
//   partition {
//     name: "unbalanced" num_clients: 1000
//     options {
//       [type.googleapis.com/fedkit.data.UnbalancedOptions] { log_normal_sigma: 1 min_size: 10 }
//     }
//   }

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "data/partitioners/unbalanced/unbalanced_options.pb.h"
#include "fl/errors.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

class UnbalancedPartitioner : public fl::Partitioner {
 public:
  UnbalancedPartitioner(double log_normal_sigma, double power_law_exponent, int min_size)
      : log_normal_sigma_(log_normal_sigma),
        power_law_exponent_(power_law_exponent),
        min_size_(min_size) {}

  absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(const fl::PartitionInput& input,
                                                              int num_clients,
                                                              std::mt19937_64& rng) const override {
    const auto n = static_cast<int64_t>(input.labels.size());
    if (num_clients < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_clients: must be >= 1, got ", num_clients));
    }
    const int64_t reserved = int64_t{num_clients} * min_size_;
    if (reserved > n) {
      return absl::InvalidArgumentError(absl::StrCat(num_clients, " clients with at least ",
                                                     min_size_, " examples each need ", reserved,
                                                     ", the training set has ", n));
    }

    // Log-weights, shifted so the largest weight is 1: no overflow for any sigma.
    std::vector<double> log_w(num_clients);
    if (log_normal_sigma_ > 0) {
      std::normal_distribution<double> normal(0.0, 1.0);
      for (double& v : log_w) v = log_normal_sigma_ * normal(rng);
    } else {
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
      for (double& v : log_w) v = -std::log1p(-uniform(rng)) / (power_law_exponent_ - 1);
    }
    const double top = *std::max_element(log_w.begin(), log_w.end());
    std::vector<double> w(num_clients);
    for (int k = 0; k < num_clients; ++k) w[k] = std::exp(log_w[k] - top);
    const double total = std::accumulate(w.begin(), w.end(), 0.0);

    const int64_t rest = n - reserved;
    std::vector<int64_t> sizes(num_clients);
    std::vector<double> remainder(num_clients);
    int64_t dealt = 0;
    for (int k = 0; k < num_clients; ++k) {
      const double exact = static_cast<double>(rest) * (w[k] / total);
      const auto whole = std::min<int64_t>(rest, static_cast<int64_t>(exact));
      sizes[k] = min_size_ + whole;
      remainder[k] = exact - static_cast<double>(whole);
      dealt += whole;
    }
    std::vector<int> by_remainder(num_clients);
    std::iota(by_remainder.begin(), by_remainder.end(), 0);
    std::stable_sort(by_remainder.begin(), by_remainder.end(),
                     [&](int a, int b) { return remainder[a] > remainder[b]; });
    // Floors never sum above `rest`; what they leave (fewer than num_clients, give or
    // take floating-point rounding) goes one each to the largest remainders.
    for (int64_t j = 0; dealt < rest; ++j, ++dealt) ++sizes[by_remainder[j % num_clients]];

    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::vector<int64_t>> shares(num_clients);
    int64_t begin = 0;
    for (int k = 0; k < num_clients; ++k) {
      shares[k].assign(order.begin() + begin, order.begin() + begin + sizes[k]);
      std::sort(shares[k].begin(), shares[k].end());
      begin += sizes[k];
    }
    return shares;
  }

 private:
  double log_normal_sigma_;    // > 0 for log-normal sizes, else 0
  double power_law_exponent_;  // > 1 for power-law sizes, else 0
  int min_size_;
};

absl::StatusOr<std::unique_ptr<fl::Partitioner>> CreateUnbalanced(
    const fedkit::data::UnbalancedOptions& options, const fl::Partitioner::CreateArgs&) {
  fl::ErrorList errors;
  switch (options.sizes_case()) {
    case fedkit::data::UnbalancedOptions::kLogNormalSigma:
      if (!(options.log_normal_sigma() > 0) || !std::isfinite(options.log_normal_sigma())) {
        errors.Add("options.log_normal_sigma",
                   absl::StrCat("must be > 0 and finite, got ", options.log_normal_sigma()));
      }
      break;
    case fedkit::data::UnbalancedOptions::kPowerLawExponent:
      if (!(options.power_law_exponent() > 1) || !std::isfinite(options.power_law_exponent())) {
        errors.Add("options.power_law_exponent",
                   absl::StrCat("must be > 1 and finite, got ", options.power_law_exponent()));
      }
      break;
    default:
      errors.Add("options", "set one of log_normal_sigma or power_law_exponent");
  }
  const int min_size = options.has_min_size() ? options.min_size() : 1;
  if (min_size < 1) errors.Add("options.min_size", absl::StrCat("must be >= 1, got ", min_size));
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<UnbalancedPartitioner>(options.log_normal_sigma(),
                                                 options.power_law_exponent(), min_size);
}

FL_REGISTER_PLUGIN(fl::Partitioner, "unbalanced", fedkit::data::UnbalancedOptions,
                   CreateUnbalanced);

}  // namespace
}  // namespace data
