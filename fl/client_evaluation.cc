#include "fl/client_evaluation.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "fl/seeding.h"

namespace fl {
namespace {

// `total` split over `weights` in proportion, by largest remainders; ties to
// the lower index. Zero weights get zero.
std::vector<int64_t> Apportion(int64_t total, const std::vector<int64_t>& weights) {
  const int64_t sum = std::accumulate(weights.begin(), weights.end(), int64_t{0});
  std::vector<int64_t> parts(weights.size(), 0);
  if (sum == 0) return parts;
  std::vector<std::pair<int64_t, size_t>> remainders;  // (remainder x sum, class)
  int64_t given = 0;
  for (size_t c = 0; c < weights.size(); ++c) {
    const int64_t exact = total * weights[c];  // parts[c] = exact / sum, exactly
    parts[c] = exact / sum;
    given += parts[c];
    if (weights[c] > 0) remainders.push_back({exact % sum, c});
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < total && i < remainders.size(); ++i, ++given) {
    ++parts[remainders[i].second];
  }
  return parts;
}

absl::Status CheckLabels(const at::Tensor& labels, int64_t num_classes, const char* what) {
  if (labels.numel() == 0) return absl::OkStatus();
  const int64_t low = labels.min().item<int64_t>();
  const int64_t high = labels.max().item<int64_t>();
  if (low < 0 || high >= num_classes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " labels: must be in [0, ", num_classes,
                                                   "), got [", low, ", ", high, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ClientTestSets> LabelMatchedTestSets(const at::Tensor& train_labels,
                                                    const std::vector<std::vector<int64_t>>& shares,
                                                    const at::Tensor& test_labels,
                                                    int64_t num_classes,
                                                    const ClientTestSetOptions& options,
                                                    uint64_t seed) {
  const auto num_clients = static_cast<int64_t>(shares.size());
  if (options.examples_per_client < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "examples_per_client: must be >= 0, got ", options.examples_per_client));
  }
  if (options.sample_clients < 0 || options.sample_clients > num_clients) {
    return absl::InvalidArgumentError(absl::StrCat("sample_clients: must be in [0, ", num_clients,
                                                   "] (the clients), got ",
                                                   options.sample_clients));
  }
  const at::Tensor train = train_labels.to(at::kCPU, at::kLong).contiguous();
  const at::Tensor test = test_labels.to(at::kCPU, at::kLong).contiguous();
  if (test.numel() == 0) return absl::InvalidArgumentError("the test split is empty");
  if (absl::Status status = CheckLabels(train, num_classes, "training"); !status.ok()) return status;
  if (absl::Status status = CheckLabels(test, num_classes, "test"); !status.ok()) return status;

  // Each class's test examples, in order.
  std::vector<at::Tensor> pools(static_cast<size_t>(num_classes));
  for (int64_t c = 0; c < num_classes; ++c) pools[c] = at::nonzero(test.eq(c)).view({-1});

  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(
      DeriveSeed(seed, SeedStream::kClientEvaluation));
  std::vector<int64_t> evaluated(static_cast<size_t>(num_clients));
  std::iota(evaluated.begin(), evaluated.end(), 0);
  if (options.sample_clients > 0) {
    const at::Tensor drawn =
        std::get<0>(at::randperm(num_clients, generator, at::kLong).narrow(0, 0, options.sample_clients).sort());
    evaluated.assign(drawn.data_ptr<int64_t>(), drawn.data_ptr<int64_t>() + drawn.numel());
  }

  const int64_t* train_data = train.data_ptr<int64_t>();
  ClientTestSets sets;
  std::vector<at::Tensor> parts;
  for (const int64_t k : evaluated) {
    std::vector<int64_t> counts(static_cast<size_t>(num_classes), 0);
    for (const int64_t i : shares[k]) {
      if (i < 0 || i >= train.numel()) {
        return absl::InvalidArgumentError(absl::StrCat("client ", k, "'s share: index ", i,
                                                       " is outside the training split of ",
                                                       train.numel()));
      }
      ++counts[train_data[i]];
    }
    const auto n_k = static_cast<int64_t>(shares[k].size());
    const int64_t wanted =
        options.examples_per_client > 0
            ? options.examples_per_client
            : std::max<int64_t>(1, std::llround(static_cast<double>(n_k) * test.numel() /
                                                std::max<int64_t>(1, train.numel())));
    const std::vector<int64_t> per_class = Apportion(wanted, counts);
    std::vector<at::Tensor> own;
    int64_t size = 0;
    for (int64_t c = 0; c < num_classes; ++c) {
      if (per_class[c] == 0) continue;
      const int64_t available = pools[c].numel();
      const int64_t take = std::min(per_class[c], available);
      sets.shortfall += per_class[c] - take;
      if (take == 0) continue;
      own.push_back(pools[c].index_select(0, at::randperm(available, generator, at::kLong).narrow(0, 0, take)));
      size += take;
    }
    if (size == 0) {
      ++sets.untestable;
      continue;
    }
    sets.clients.push_back(k);
    sets.sizes.push_back(size);
    parts.push_back(at::cat(own));
  }
  if (parts.empty()) {
    sets.indices = at::empty({0}, at::kLong);
    sets.owner = at::empty({0}, at::kLong);
    return sets;
  }
  sets.indices = at::cat(parts);
  const at::Tensor sizes = at::tensor(sets.sizes, at::kLong);
  sets.owner = at::repeat_interleave(at::arange(static_cast<int64_t>(sets.sizes.size()), at::kLong), sizes);
  return sets;
}

std::map<std::string, double> ClientAccuracyColumns(const ClientAccuracy& accuracy) {
  return {{"client_acc_mean", accuracy.mean},
          {"client_acc_sd", accuracy.stddev},
          {"client_acc_p10", accuracy.percentile_10},
          {"client_acc_worst", accuracy.worst},
          {"client_acc_pooled", accuracy.pooled}};
}

ClientAccuracy SummarizeClientAccuracy(const ClientTestSets& sets, const at::Tensor& correct) {
  const auto n = static_cast<int64_t>(sets.clients.size());
  const at::Tensor hits = at::zeros({n}, at::kDouble).index_add_(
      0, sets.owner, correct.to(at::kCPU, at::kDouble).index_select(0, sets.indices));
  const at::Tensor accuracy = hits / at::tensor(sets.sizes, at::kDouble);
  return SummarizeAccuracies({accuracy.data_ptr<double>(), accuracy.data_ptr<double>() + n},
                             sets.sizes);
}

ClientAccuracy SummarizeAccuracies(std::vector<double> per_client, const std::vector<int64_t>& sizes) {
  CHECK(!per_client.empty()) << "no client accuracy to summarise";
  CHECK_EQ(per_client.size(), sizes.size());
  ClientAccuracy result;
  double hits = 0.0;
  double examples = 0.0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    hits += per_client[k] * static_cast<double>(sizes[k]);
    examples += static_cast<double>(sizes[k]);
  }
  result.pooled = hits / examples;
  result.per_client = std::move(per_client);
  const auto n = static_cast<double>(result.per_client.size());
  std::vector<double> sorted = result.per_client;
  std::sort(sorted.begin(), sorted.end());
  const double mean = std::accumulate(sorted.begin(), sorted.end(), 0.0) / n;
  double squares = 0.0;
  for (const double a : sorted) squares += (a - mean) * (a - mean);
  result.mean = mean;
  result.stddev = std::sqrt(squares / n);
  const double position = 0.1 * (n - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  result.percentile_10 = sorted[below] + (position - static_cast<double>(below)) * (sorted[above] - sorted[below]);
  result.worst = sorted.front();
  return result;
}

}  // namespace fl
