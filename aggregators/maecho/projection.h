#ifndef AGGREGATORS_MAECHO_PROJECTION_H_
#define AGGREGATORS_MAECHO_PROJECTION_H_

// MA-Echo's per-layer projection matrix, as its official code builds it (the
// recursive least-squares projector of orthogonal weight modification with a
// shrink factor c): starting from P = I, each input row r takes
//   k = P r,   P <- P - c k k^T / (a + r.k).
// With c = 1 after rows X this is I - X^T (X X^T + a I)^-1 X, the projector onto the
// null space of X up to a; with c < 1 each update removes only a share c of the
// new direction. P is kept as I - G G^T, with G (d x rank) the scaled k's: exact,
// and far smaller than d x d when the client saw fewer rows than d (one per
// mini-batch for a linear layer). G is what a client sends.

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace aggregators {

class ProjectorRecursion {
 public:
  // `shrink` (c) in (0, 1], `regularizer` (a) > 0.
  ProjectorRecursion(int64_t dim, double shrink, double regularizer, const at::Tensor& like);

  // One update per row of `rows` ({m, dim}), in order.
  void Update(const at::Tensor& rows);

  // G with P = I - G G^T: one column per row seen, compacted to at most `dim`
  // columns whenever 2 dim are reached.
  at::Tensor factor() const;
  at::Tensor Dense() const;  // I - G G^T

 private:
  // Replaces G by the eigen-factor of G G^T (its positive eigenvalues), <= dim columns.
  void Compact();

  int64_t dim_;
  double shrink_;
  double regularizer_;
  at::Tensor g_;  // {dim, capacity <= 2 dim}; the first used_ columns hold G
  int64_t used_ = 0;
};

// The factor of the `k` principal components of G G^T (G' = U_k sqrt(L_k), the top-k
// eigenpairs), or `factor` itself when it has no more than k columns.
at::Tensor TopComponents(const at::Tensor& factor, int64_t k);

// The patches a convolution's projector sees in MA-Echo's code: every
// kernel-sized window of the input map `map` ({C, H, W}, a batch mean), at
// `stride` with no padding, flattened in (C, kh, kw) order, one row per window
// (row-major over window positions).
at::Tensor ConvPatches(const at::Tensor& map, const std::vector<int64_t>& kernel, int64_t stride);

}  // namespace aggregators

#endif  // AGGREGATORS_MAECHO_PROJECTION_H_
