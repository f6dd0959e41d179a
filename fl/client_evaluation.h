#ifndef FL_CLIENT_EVALUATION_H_
#define FL_CLIENT_EVALUATION_H_

// Each client's accuracy on test data of its own label distribution: what
// personalised FL is judged by (the mean over clients, their spread and the
// worst-off ones), and what one global model's test accuracy hides under label
// skew.
//
// LabelMatchedTestSets gives client k, whose training share holds c_k[y]
// examples of class y (n_k in all), m_k test examples: options.examples_per_client,
// or by default round(n_k |test| / |train|), at least 1. They are split over the
// classes in proportion to c_k by largest remainders (ties to the lower class),
// so a class the client never trains on is never tested, and each class's part is
// drawn without replacement from the test examples of that class; a part larger
// than the class's test examples takes all of them (the shortfall is counted in
// `shortfall`). Clients draw independently of each other, all from one stream
// of the run's seed, so the sets are the same for every run of a spec.
//
// A model's per-client accuracies then need one pass over the test split: each
// test example's correctness, gathered per client (SummarizeClientAccuracy).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"

namespace fl {

struct ClientTestSetOptions {
  // Test examples per client; 0: in proportion to its training share.
  int64_t examples_per_client = 0;
  // Clients evaluated: 0 for every client, else this many drawn once from the
  // seed (the same clients at every evaluation).
  int64_t sample_clients = 0;
};

struct ClientTestSets {
  std::vector<int64_t> clients;  // the clients evaluated, ascending
  std::vector<int64_t> sizes;    // each one's test examples
  at::Tensor indices;            // their test indices, client after client (int64)
  at::Tensor owner;              // for each index, its client's position in `clients`
  int64_t shortfall = 0;         // examples a class's test pool could not supply
  // Clients left out because no test example has a class they train on.
  int64_t untestable = 0;
};

// `train_labels` and `test_labels`: int64 class ids in [0, num_classes);
// `shares`: each client's indices into train_labels. Errors (InvalidArgument,
// naming the option or input): options.examples_per_client or
// options.sample_clients negative, sample_clients above the number of clients,
// an empty test split, a label outside [0, num_classes), a share index outside
// the training split.
absl::StatusOr<ClientTestSets> LabelMatchedTestSets(const at::Tensor& train_labels,
                                                    const std::vector<std::vector<int64_t>>& shares,
                                                    const at::Tensor& test_labels,
                                                    int64_t num_classes,
                                                    const ClientTestSetOptions& options,
                                                    uint64_t seed);

struct ClientAccuracy {
  std::vector<double> per_client;  // in ClientTestSets::clients' order
  double mean = 0.0;
  double stddev = 0.0;        // population (over the clients evaluated)
  double percentile_10 = 0.0;  // linear between order statistics, as numpy's default
  double worst = 0.0;
  // Right answers over all evaluated clients' test examples: each client weighted
  // by its test set's size, the "average accuracy" pFedMe's and PFLlib's code report.
  double pooled = 0.0;
};

// metrics.csv's columns: client_acc_mean, client_acc_sd, client_acc_p10,
// client_acc_worst, client_acc_pooled.
std::map<std::string, double> ClientAccuracyColumns(const ClientAccuracy& accuracy);

// `correct`: one value per test example, nonzero where the model was right
// (bool or integer, any device). REQUIRES: `sets` has at least one client with
// at least one example, and every index is within `correct`.
ClientAccuracy SummarizeClientAccuracy(const ClientTestSets& sets, const at::Tensor& correct);

// The summary of per-client accuracies measured one by one (each client's own
// model) on test sets of `sizes` examples. REQUIRES: at least one, and a size > 0
// for each.
ClientAccuracy SummarizeAccuracies(std::vector<double> per_client, const std::vector<int64_t>& sizes);

}  // namespace fl

#endif  // FL_CLIENT_EVALUATION_H_
