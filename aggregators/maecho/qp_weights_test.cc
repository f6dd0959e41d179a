#include "aggregators/maecho/qp_weights.h"

#include <limits>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "gtest/gtest.h"

namespace aggregators {
namespace {

double Objective(const at::Tensor& a, const std::vector<double>& alpha) {
  const at::Tensor x = at::tensor(alpha, at::kDouble);
  return 0.5 * at::dot(x, at::mv(a, x)).item<double>();
}

// Every feasible point of a grid of step 1/400 over {a + b + c = 1, 0 <= . <= bound}.
double GridMinimum(const at::Tensor& a, double bound) {
  double best = std::numeric_limits<double>::infinity();
  const int steps = 400;
  for (int i = 0; i <= steps; ++i) {
    for (int j = 0; i + j <= steps; ++j) {
      const std::vector<double> alpha = {i / double(steps), j / double(steps),
                                         (steps - i - j) / double(steps)};
      if (alpha[0] > bound || alpha[1] > bound || alpha[2] > bound) continue;
      best = std::min(best, Objective(a, alpha));
    }
  }
  return best;
}

TEST(QpWeightsTest, AgreesWithABruteForceGridForThreeClients) {
  torch::manual_seed(8);
  for (double bound : {1.0, 0.5, 0.4}) {
    for (int trial = 0; trial < 4; ++trial) {
      const at::Tensor z = at::randn({3, 5}, at::kDouble) * (trial + 1);
      const at::Tensor a = at::mm(z, z.t());
      auto alpha = SimplexBoxQp(a, bound);
      ASSERT_TRUE(alpha.ok()) << alpha.status();
      double sum = 0;
      for (double x : *alpha) {
        EXPECT_GE(x, -1e-8);
        EXPECT_LE(x, bound + 1e-8);
        sum += x;
      }
      EXPECT_NEAR(sum, 1.0, 1e-8);
      const double grid = GridMinimum(a, bound);
      // The solution is no worse than the best grid point, and near it.
      EXPECT_LE(Objective(a, *alpha), grid + 1e-9) << bound << " " << trial;
      EXPECT_GE(Objective(a, *alpha), grid - 1e-3 * std::max(1.0, grid)) << bound << " " << trial;
    }
  }
}

TEST(QpWeightsTest, AHalfBoundForcesEqualWeightsForTwoClients) {
  const at::Tensor a = at::tensor({1.0, 0.0, 0.0, 9.0}, at::kDouble).view({2, 2});
  auto alpha = SimplexBoxQp(a, 0.5);
  ASSERT_TRUE(alpha.ok());
  EXPECT_NEAR((*alpha)[0], 0.5, 1e-8);
  // Unbounded, the smaller diagonal gets the larger weight: 9 / 10.
  EXPECT_NEAR((*SimplexBoxQp(a, 1.0))[0], 0.9, 1e-6);
}

TEST(QpWeightsTest, RefusesAnInfeasibleBound) {
  EXPECT_EQ(SimplexBoxQp(at::eye(4, at::kDouble), 0.2).status().message(),
            "no weights of 4 clients in [0, 0.2] sum to 1: the bound must be >= 1 / 4");
}

}  // namespace
}  // namespace aggregators
