#include "aggregators/maecho/projection.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace aggregators {

ProjectorRecursion::ProjectorRecursion(int64_t dim, double shrink, double regularizer,
                                       const at::Tensor& like)
    : dim_(dim),
      shrink_(shrink),
      regularizer_(regularizer),
      g_(at::zeros({dim, std::min<int64_t>(2 * dim, 64)}, like.options())) {
  TORCH_CHECK(dim >= 1 && shrink > 0 && shrink <= 1 && regularizer > 0);
}

void ProjectorRecursion::Update(const at::Tensor& rows) {
  TORCH_CHECK(rows.dim() == 2 && rows.size(1) == dim_, "rows of ", dim_, " expected, got ",
              rows.sizes());
  for (int64_t j = 0; j < rows.size(0); ++j) {
    if (used_ == g_.size(1)) {
      if (used_ < 2 * dim_) {
        at::Tensor grown = at::zeros({dim_, std::min(2 * dim_, 2 * used_)}, g_.options());
        grown.narrow(1, 0, used_).copy_(g_);
        g_ = grown;
      } else {
        Compact();
      }
    }
    const at::Tensor r = rows[j].to(g_.dtype());
    const at::Tensor g = g_.narrow(1, 0, used_);
    const at::Tensor k = used_ == 0 ? r : r - at::mv(g, at::mv(g.t(), r));
    // a + r.k > 0: P is positive definite.
    const at::Tensor scale = at::sqrt(shrink_ / (regularizer_ + at::dot(r, k)));
    g_.select(1, used_).copy_(k * scale);
    ++used_;
  }
}

void ProjectorRecursion::Compact() {
  const at::Tensor g = g_.narrow(1, 0, used_);
  // In double: eigenvalues near zero must not turn negative by rounding.
  auto [values, vectors] = at::linalg_eigh(at::mm(g, g.t()).to(at::kDouble));
  const at::Tensor keep = values.gt(0).nonzero().flatten();
  const at::Tensor compact =
      (vectors.index_select(1, keep) * values.index_select(0, keep).sqrt()).to(g_.dtype());
  g_.zero_();
  used_ = compact.size(1);
  g_.narrow(1, 0, used_).copy_(compact);
}

at::Tensor ProjectorRecursion::factor() const { return g_.narrow(1, 0, used_).clone(); }

at::Tensor ProjectorRecursion::Dense() const {
  const at::Tensor g = g_.narrow(1, 0, used_);
  return at::eye(dim_, g_.options()) - at::mm(g, g.t());
}

at::Tensor TopComponents(const at::Tensor& factor, int64_t k) {
  if (factor.size(1) <= k) return factor;
  auto [values, vectors] = at::linalg_eigh(at::mm(factor, factor.t()).to(at::kDouble));
  // eigh sorts ascending: the last k are the largest.
  const int64_t d = values.size(0);
  const at::Tensor top_values = values.narrow(0, d - k, k).clamp_min(0);
  return (vectors.narrow(1, d - k, k) * top_values.sqrt()).to(factor.dtype());
}

at::Tensor ConvPatches(const at::Tensor& map, const std::vector<int64_t>& kernel, int64_t stride) {
  TORCH_CHECK(map.dim() == 3 && kernel.size() == 2, "a {C, H, W} map and a 2-D kernel expected");
  // im2col: {C * kh * kw, windows}, channels outermost, windows row-major.
  return at::im2col(map.unsqueeze(0), kernel, /*dilation=*/{1, 1}, /*padding=*/{0, 0},
                    {stride, stride})
      .squeeze(0)
      .t()
      .contiguous();
}

}  // namespace aggregators
