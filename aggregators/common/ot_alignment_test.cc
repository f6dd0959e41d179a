#include "aggregators/common/ot_alignment.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "gtest/gtest.h"

namespace aggregators {
namespace {

// A 5-4-3-2 MLP with biases on the first two layers.
fl::ModelState Mlp() {
  return fl::ModelState({{"w0", at::randn({4, 5}), false},
                         {"b0", at::randn({4}), false},
                         {"w1", at::randn({3, 4}), false},
                         {"b1", at::randn({3}), false},
                         {"w2", at::randn({2, 3}), false}});
}

at::Tensor Forward(const fl::ModelState& m, const at::Tensor& x) {
  at::Tensor h = at::linear(x, m.tensor(0), m.tensor(1)).relu();
  h = at::linear(h, m.tensor(2), m.tensor(3)).relu();
  return at::linear(h, m.tensor(4));
}

TEST(OtAlignmentTest, TheAssignmentIsTheBruteForceOptimum) {
  torch::manual_seed(3);
  for (int trial = 0; trial < 5; ++trial) {
    const at::Tensor cost = at::rand({5, 5}, at::kDouble);
    const std::vector<int64_t> match = MinCostAssignment(cost);
    double found = 0;
    for (int64_t c = 0; c < 5; ++c) found += cost[match[c]][c].item<double>();
    std::vector<int64_t> perm(5);
    std::iota(perm.begin(), perm.end(), 0);
    double best = std::numeric_limits<double>::infinity();
    do {
      double total = 0;
      for (int64_t c = 0; c < 5; ++c) total += cost[perm[c]][c].item<double>();
      best = std::min(best, total);
    } while (std::next_permutation(perm.begin(), perm.end()));
    EXPECT_NEAR(found, best, 1e-12) << trial;
  }
}

TEST(OtAlignmentTest, FindsTheChainAndRefusesOtherShapes) {
  auto chain = LinearChain(Mlp());
  ASSERT_TRUE(chain.ok()) << chain.status();
  ASSERT_EQ(chain->size(), 3u);
  EXPECT_EQ((*chain)[1].weight, 2u);
  EXPECT_EQ((*chain)[1].bias, 3u);
  EXPECT_FALSE((*chain)[2].bias.has_value());
  fl::ModelState conv({{"c", at::zeros({4, 3, 3, 3}), false}});
  EXPECT_FALSE(LinearChain(conv).ok());
  fl::ModelState broken({{"a", at::zeros({4, 5}), false}, {"b", at::zeros({3, 6}), false}});
  EXPECT_EQ(LinearChain(broken).status().message(),
            "\"b\" takes 6 inputs but the layer before gives 4: OT alignment needs a chain of "
            "linear layers");
}

TEST(OtAlignmentTest, RecoversTheNeuronPermutationOfACopy) {
  torch::manual_seed(4);
  const fl::ModelState reference = Mlp();
  const auto chain = *LinearChain(reference);
  const std::vector<at::Tensor> shuffle = {at::tensor({2, 0, 3, 1}, at::kLong),
                                           at::tensor({1, 2, 0}, at::kLong)};
  const fl::ModelState copy = PermuteNeurons(reference, chain, shuffle);
  const at::Tensor x = at::randn({7, 5});
  // Reordering hidden neurons does not change the function...
  EXPECT_TRUE(at::allclose(Forward(copy, x), Forward(reference, x), 1e-5, 1e-6));
  EXPECT_FALSE(copy.tensor(0).equal(reference.tensor(0)));
  // ...and the alignment undoes it exactly.
  const fl::ModelState aligned = PermuteNeurons(copy, chain, AlignNeurons(reference, copy, chain));
  for (size_t i = 0; i < reference.size(); ++i) {
    EXPECT_TRUE(aligned.tensor(i).equal(reference.tensor(i))) << reference.entries()[i].name;
  }
}

}  // namespace
}  // namespace aggregators
