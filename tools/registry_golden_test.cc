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
  EXPECT_THAT(fl::Registry<fl::Dataset>::Global().Names(), ElementsAre("fashion_mnist"));
}

TEST(RegistryGoldenTest, Partitioners) {
  EXPECT_THAT(fl::Registry<fl::Partitioner>::Global().Names(),
              ElementsAre("dirichlet", "dirichlet_equal", "iid"));
}

TEST(RegistryGoldenTest, Models) {
  EXPECT_THAT(fl::Registry<fl::Model>::Global().Names(), ElementsAre("mlp"));
}

TEST(RegistryGoldenTest, Aggregators) {
  EXPECT_THAT(fl::Registry<fl::Aggregator>::Global().Names(), ElementsAre(
                                                                  "elastic",
                                                                  "fedadagrad",
                                                                  "fedadam",
                                                                  "fedavg",
                                                                  "fedavgm",
                                                                  "fedexp",
                                                                  "fedprox",
                                                                  "fedyogi",
                                                                  "scaffold"));
}

TEST(RegistryGoldenTest, ClientHooks) {
  EXPECT_THAT(fl::Registry<fl::ClientHook>::Global().Names(), ElementsAre(
                                                                  "elastic",
                                                                  "fedexp",
                                                                  "fedprox",
                                                                  "scaffold"));
}

}  // namespace
