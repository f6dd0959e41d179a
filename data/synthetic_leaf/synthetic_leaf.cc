// FedProx's synthetic(alpha, beta) data (Li et al., MLSys 2020, Section 5.1; code:
// litian96/FedProx, data/synthetic_*/generate_synthetic.py; the same generator as
// LEAF's synthetic benchmark), which EFL also trains on: device k's examples
// follow its own softmax-regression model y = argmax(softmax(W_k x + b_k)), with
//   u_k ~ N(0, alpha^2),  W_k (60 x 10), b_k (10): entries ~ N(u_k, 1),
//   B_k ~ N(0, beta^2),   v_k (60): entries ~ N(B_k, 1),
//   x ~ N(v_k, Sigma),    Sigma = diag(j^-1.2), j = 1..60,
// so alpha controls how much the local models differ and beta how much the local
// inputs do. Device sizes are log-normal as in that code: n_k = floor(e^(4 + 2 z))
// + 50. Each device's examples are shuffled and its first floor((1 - test_fraction)
// n_k) go to the training split, the rest to the test split, as FedProx's 90/10.
// The training split records each example's device as its owner id, so the
// "natural" partitioner gives one client per device. Inputs are the raw features
// (float32, shape {60}), not normalised, as in FedProx.
//
// Where we differ: FedProx names the spread N(0, alpha) but draws with standard
// deviation alpha (np.random.normal(0, alpha)); we follow the code. Random numbers
// come from std::mt19937_64 seeded with options.seed, in the code's order (sizes,
// u, B, v, [iid: W, b], then W_k, b_k, x per device, then the per-device shuffles),
// so the same seed gives the same data, but not numpy's numbers.
//
//   dataset {
//     name: "synthetic_leaf"
//     options { [type.googleapis.com/fedkit.data.SyntheticLeafOptions] { alpha: 1 beta: 1 } }
//   }
//   partition { name: "natural" num_clients: 30 }

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "data/synthetic_leaf/synthetic_leaf_options.pb.h"
#include "fl/dataset.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

constexpr int64_t kFeatures = 60;
constexpr int64_t kClasses = 10;
constexpr double kSizeLogMean = 4.0;
constexpr double kSizeLogSigma = 2.0;
constexpr int64_t kSizeOffset = 50;

struct Config {
  double alpha;
  double beta;
  bool iid;
  int num_clients;
  uint64_t seed;
  double test_fraction;
};

// Appends rows and labels as float / int64 vectors before one tensor copy.
struct Columns {
  std::vector<float> x;
  std::vector<int64_t> y;
  std::vector<int64_t> owner;

  fl::Examples ToExamples() const {
    const auto n = static_cast<int64_t>(y.size());
    return {at::tensor(x, at::kFloat).reshape({n, kFeatures}), at::tensor(y, at::kLong)};
  }
};

class SyntheticLeaf : public fl::Dataset {
 public:
  explicit SyntheticLeaf(const Config& config) : config_(config) {}

  fl::DatasetInfo info() const override { return {{kFeatures}, kClasses}; }

  absl::Status CheckAvailable() const override { return absl::OkStatus(); }

  absl::StatusOr<fl::DatasetSplits> Load() const override {
    const int devices = config_.num_clients;
    std::mt19937_64 rng(config_.seed);
    std::normal_distribution<double> normal(0.0, 1.0);

    std::vector<int64_t> sizes(devices);
    std::lognormal_distribution<double> lognormal(kSizeLogMean, kSizeLogSigma);
    for (int64_t& n : sizes) n = static_cast<int64_t>(lognormal(rng)) + kSizeOffset;
    std::vector<double> u(devices), b_mean(devices);
    for (double& v : u) v = config_.alpha * normal(rng);
    for (double& v : b_mean) v = config_.beta * normal(rng);
    std::vector<std::vector<double>> v(devices, std::vector<double>(kFeatures));
    for (int k = 0; k < devices; ++k) {
      for (double& e : v[k]) e = config_.iid ? b_mean[k] : b_mean[k] + normal(rng);
    }
    std::vector<double> w_global, b_global;
    if (config_.iid) {
      w_global.resize(kFeatures * kClasses);
      b_global.resize(kClasses);
      for (double& e : w_global) e = normal(rng);
      for (double& e : b_global) e = normal(rng);
    }
    std::vector<double> sd(kFeatures);
    for (int64_t j = 0; j < kFeatures; ++j) sd[j] = std::sqrt(std::pow(j + 1.0, -1.2));

    Columns train, test;
    std::vector<double> w(kFeatures * kClasses), b(kClasses), x(kFeatures);
    for (int k = 0; k < devices; ++k) {
      if (config_.iid) {
        w = w_global;
        b = b_global;
      } else {
        for (double& e : w) e = u[k] + normal(rng);  // row-major: w[j * kClasses + c]
        for (double& e : b) e = u[k] + normal(rng);
      }
      std::vector<float> rows;
      std::vector<int64_t> labels;
      for (int64_t i = 0; i < sizes[k]; ++i) {
        for (int64_t j = 0; j < kFeatures; ++j) x[j] = v[k][j] + sd[j] * normal(rng);
        std::vector<double> logits(b);
        for (int64_t j = 0; j < kFeatures; ++j) {
          for (int64_t c = 0; c < kClasses; ++c) logits[c] += x[j] * w[j * kClasses + c];
        }
        labels.push_back(std::max_element(logits.begin(), logits.end()) - logits.begin());
        rows.insert(rows.end(), x.begin(), x.end());
      }
      std::vector<int64_t> order(sizes[k]);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      const auto train_len =
          static_cast<int64_t>((1.0 - config_.test_fraction) * static_cast<double>(sizes[k]));
      for (int64_t r = 0; r < sizes[k]; ++r) {
        Columns& to = r < train_len ? train : test;
        const int64_t i = order[r];
        to.x.insert(to.x.end(), rows.begin() + i * kFeatures, rows.begin() + (i + 1) * kFeatures);
        to.y.push_back(labels[i]);
        to.owner.push_back(k);
      }
    }
    fl::DatasetSplits splits;
    splits.train = train.ToExamples();
    splits.test = test.ToExamples();
    splits.train_owners = at::tensor(train.owner, at::kLong);
    return splits;
  }

 private:
  Config config_;
};

absl::StatusOr<std::unique_ptr<fl::Dataset>> CreateSyntheticLeaf(
    const fedkit::data::SyntheticLeafOptions& options, const fl::Dataset::CreateArgs&) {
  fl::ErrorList errors;
  Config config;
  config.alpha = options.alpha();
  config.beta = options.beta();
  config.iid = options.iid();
  config.num_clients = options.has_num_clients() ? options.num_clients() : 30;
  config.seed = options.seed();
  config.test_fraction = options.has_test_fraction() ? options.test_fraction() : 0.1;
  if (!(config.alpha >= 0) || !std::isfinite(config.alpha)) {
    errors.Add("options.alpha", absl::StrCat("must be >= 0 and finite, got ", config.alpha));
  }
  if (!(config.beta >= 0) || !std::isfinite(config.beta)) {
    errors.Add("options.beta", absl::StrCat("must be >= 0 and finite, got ", config.beta));
  }
  if (config.num_clients < 1) {
    errors.Add("options.num_clients", absl::StrCat("must be >= 1, got ", config.num_clients));
  }
  if (!(config.test_fraction >= 0 && config.test_fraction < 1)) {
    errors.Add("options.test_fraction",
               absl::StrCat("must be in [0, 1), got ", config.test_fraction));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<SyntheticLeaf>(config);
}

FL_REGISTER_PLUGIN(fl::Dataset, "synthetic_leaf", fedkit::data::SyntheticLeafOptions,
                   CreateSyntheticLeaf);

}  // namespace
}  // namespace data
