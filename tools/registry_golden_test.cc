// The golden list of registered plugins: a plugin that silently drops out of the
// build (a missing alwayslink, a target left out of an :all umbrella) fails here.
// Adding a plugin means adding its name below.

#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/dataset.h"
#include "fl/model.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::ElementsAre;

TEST(RegistryGoldenTest, Datasets) {
  EXPECT_THAT(fl::Registry<fl::Dataset>::Global().Names(), ElementsAre("cifar10", "cifar100", "cinic10", "emnist", "fashion_mnist", "mnist", "shakespeare", "synthetic_leaf"));
}

TEST(RegistryGoldenTest, Partitioners) {
  EXPECT_THAT(fl::Registry<fl::Partitioner>::Global().Names(),
              ElementsAre("dirichlet", "dirichlet_equal", "file", "iid", "natural", "shards", "unbalanced"));
}

TEST(RegistryGoldenTest, Models) {
  EXPECT_THAT(fl::Registry<fl::Model>::Global().Names(), ElementsAre("char_lstm", "cnn_emnist", "cnn_pfl", "fednet", "lenet5", "logreg", "mlp", "resnet18_gn", "resnet20", "simple_cnn", "vgg11"));
}

TEST(RegistryGoldenTest, Aggregators) {
  EXPECT_THAT(fl::Registry<fl::Aggregator>::Global().Names(), ElementsAre(
                                                                  "apfl",
                                                                  "ditto",
                                                                  "dp_fedavg",
                                                                  "efl",
                                                                  "elastic",
                                                                  "ensemble",
                                                                  "fedadagrad",
                                                                  "fedadam",
                                                                  "fedavg",
                                                                  "fedavgm",
                                                                  "fedbabu",
                                                                  "fedbn",
                                                                  "feddf",
                                                                  "fedexp",
                                                                  "fedlaw",
                                                                  "fednova",
                                                                  "fedper",
                                                                  "fedprox",
                                                                  "fedrep",
                                                                  "fedyogi",
                                                                  "geometric_median",
                                                                  "krum",
                                                                  "lg_fedavg",
                                                                  "maecho",
                                                                  "median",
                                                                  "norm_clip",
                                                                  "ot_fusion",
                                                                  "per_fedavg",
                                                                  "pfedme",
                                                                  "scaffold",
                                                                  "server_ft",
                                                                  "split_average",
                                                                  "trimmed_mean"));
}

TEST(RegistryGoldenTest, ClientHooks) {
  EXPECT_THAT(fl::Registry<fl::ClientHook>::Global().Names(), ElementsAre(
                                                                  "apfl",
                                                                  "class_counts",
                                                                  "ditto",
                                                                  "dp_clip",
                                                                  "efl",
                                                                  "elastic",
                                                                  "fedexp",
                                                                  "fedprox",
                                                                  "holdout",
                                                                  "maecho",
                                                                  "per_fedavg",
                                                                  "pfedme",
                                                                  "scaffold"));
}

}  // namespace
