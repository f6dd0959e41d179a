#include "data/synthetic/linear_regression.h"

#include <ATen/ATen.h>

#include "gtest/gtest.h"

namespace data {
namespace {

LinearRegressionConfig Small() {
  LinearRegressionConfig config;
  config.dims = 50;
  config.clients = 4;
  config.samples_per_client = 6;
  config.seed = 3;
  return config;
}

TEST(LinearRegressionTest, ShapesAndUnitNorms) {
  const LinearRegressionProblem p = MakeLinearRegression(Small());
  ASSERT_EQ(p.x.size(), 4);
  ASSERT_EQ(p.y.size(), 4);
  for (size_t i = 0; i < p.x.size(); ++i) {
    EXPECT_EQ(p.x[i].sizes(), (std::vector<int64_t>{6, 50}));
    EXPECT_EQ(p.x[i].scalar_type(), at::kDouble);
    EXPECT_TRUE(at::allclose(p.x[i].norm(2, {1}), at::ones({6}, at::kDouble)));
    EXPECT_NEAR(p.y[i].norm().item<double>(), 1.0, 1e-12);
  }
  EXPECT_EQ(p.w_star.sizes(), (std::vector<int64_t>{50}));
}

TEST(LinearRegressionTest, WStarIsTheMinimumNormSolution) {
  const LinearRegressionProblem p = MakeLinearRegression(Small());
  const at::Tensor x = at::cat(p.x);
  const at::Tensor y = at::cat(p.y);
  // Solves every client's equations exactly...
  EXPECT_LT((x.matmul(p.w_star) - y).abs().max().item<double>(), 1e-10);
  // ...and lies in X's row space (so no other solution has a smaller norm): it is
  // its own projection X^T (X X^T)^{-1} X w*.
  const at::Tensor projected = x.t().matmul(at::linalg_solve(x.matmul(x.t()), x.matmul(p.w_star)));
  EXPECT_LT((projected - p.w_star).abs().max().item<double>(), 1e-10);
  // Equal to the pseudo-inverse solution.
  EXPECT_TRUE(at::allclose(p.w_star, at::linalg_pinv(x).matmul(y), 1e-8, 1e-10));
}

TEST(LinearRegressionTest, SameSeedSameProblemOtherSeedOther) {
  const LinearRegressionProblem a = MakeLinearRegression(Small());
  const LinearRegressionProblem b = MakeLinearRegression(Small());
  LinearRegressionConfig other = Small();
  other.seed = 4;
  const LinearRegressionProblem c = MakeLinearRegression(other);
  EXPECT_TRUE(a.x[2].equal(b.x[2]));
  EXPECT_TRUE(a.w_star.equal(b.w_star));
  EXPECT_FALSE(a.x[2].equal(c.x[2]));
}

}  // namespace
}  // namespace data
