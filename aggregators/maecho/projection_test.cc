#include "aggregators/maecho/projection.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "gtest/gtest.h"

namespace aggregators {
namespace {

// The code's recursion on the dense matrix, as written there.
at::Tensor DenseRecursion(const at::Tensor& rows, double c, double a) {
  at::Tensor p = at::eye(rows.size(1), at::kDouble);
  for (int64_t j = 0; j < rows.size(0); ++j) {
    const at::Tensor r = rows[j].to(at::kDouble).view({-1, 1});
    const at::Tensor k = at::mm(p, r);
    p = p - c * at::mm(k, k.t()) / (a + at::mm(r.t(), k));
  }
  return p;
}

TEST(ProjectionTest, WithShrinkOneTheRecursionIsTheRegularisedNullSpaceProjector) {
  torch::manual_seed(1);
  const double a = 0.05;
  // 4 full-rank rows in 6 dimensions.
  const at::Tensor x = at::randn({4, 6}, at::kDouble);
  ProjectorRecursion recursion(6, 1.0, a, x);
  recursion.Update(x);
  const at::Tensor closed_form =
      at::eye(6, at::kDouble) -
      at::mm(at::mm(x.t(), at::inverse(at::mm(x, x.t()) + a * at::eye(4, at::kDouble))), x);
  EXPECT_TRUE(at::allclose(recursion.Dense(), closed_form, 1e-9, 1e-10));
  EXPECT_EQ(recursion.factor().size(1), 4);  // one column per row
}

TEST(ProjectionTest, TheFactorMatchesTheDenseRecursionThroughCompaction) {
  torch::manual_seed(2);
  // 30 rows in 5 dimensions: the factor is compacted twice on the way (at 10 columns).
  const at::Tensor rows = at::randn({30, 5}, at::kDouble);
  ProjectorRecursion recursion(5, 0.5, 0.0251, rows);
  recursion.Update(rows);
  EXPECT_LE(recursion.factor().size(1), 10);
  EXPECT_TRUE(at::allclose(recursion.Dense(), DenseRecursion(rows, 0.5, 0.0251), 1e-9, 1e-10));
}

TEST(ProjectionTest, HalfShrinkKeepsAboutHalfOfADirectionSeenOnce) {
  const at::Tensor e0 = at::tensor({3.0, 0.0, 0.0}, at::kDouble).view({1, 3});
  ProjectorRecursion recursion(3, 0.5, 1e-6, e0);
  recursion.Update(e0);
  const at::Tensor p = recursion.Dense();
  EXPECT_NEAR(p[0][0].item<double>(), 0.5, 1e-6);
  EXPECT_DOUBLE_EQ(p[1][1].item<double>(), 1.0);  // unseen directions stay
  recursion.Update(at::cat({e0, e0, e0}));
  EXPECT_NEAR(recursion.Dense()[0][0].item<double>(), 1.0 / 16, 1e-5);  // halved each time
}

TEST(ProjectionTest, TopComponentsKeepTheLargestEigenpairs) {
  // G G^T = diag(4, 1, 0.25): the top 2 components give diag(4, 1, 0).
  const at::Tensor g = at::diag(at::tensor({2.0, 1.0, 0.5}, at::kDouble));
  const at::Tensor top = TopComponents(g, 2);
  EXPECT_EQ(top.sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE(at::allclose(at::mm(top, top.t()), at::diag(at::tensor({4.0, 1.0, 0.0}, at::kDouble)),
                           1e-9, 1e-12));
  EXPECT_TRUE(at::equal(TopComponents(g, 5), g));
}

TEST(ProjectionTest, ConvPatchesAreTheUnpaddedWindowsAtTheStride) {
  // One channel 5x5 holding 0..24; 3x3 windows at stride 2: positions (0,0), (0,2),
  // (2,0), (2,2).
  const at::Tensor map = at::arange(25, at::kDouble).view({1, 5, 5});
  const at::Tensor rows = ConvPatches(map, {3, 3}, 2);
  ASSERT_EQ(rows.sizes(), (std::vector<int64_t>{4, 9}));
  EXPECT_TRUE(at::equal(rows[0], at::tensor({0., 1., 2., 5., 6., 7., 10., 11., 12.}, at::kDouble)));
  EXPECT_TRUE(at::equal(rows[1], at::tensor({2., 3., 4., 7., 8., 9., 12., 13., 14.}, at::kDouble)));
  EXPECT_TRUE(at::equal(rows[2], map[0].narrow(0, 2, 3).narrow(1, 0, 3).flatten()));
  // Two channels: channel-major within a row.
  const at::Tensor two = at::stack({map[0], map[0] + 100}).view({2, 5, 5});
  EXPECT_EQ(ConvPatches(two, {3, 3}, 2).size(1), 18);
  EXPECT_EQ(ConvPatches(two, {3, 3}, 2)[0][9].item<double>(), 100.0);
}

}  // namespace
}  // namespace aggregators
