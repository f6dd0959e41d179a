#include "data/normalization.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

namespace data {

at::Tensor BytesToInputs(const at::Tensor& images, const ChannelStats& stats, bool normalize) {
  CHECK_EQ(images.dim(), 4);
  CHECK_EQ(images.size(1), stats.channels);
  at::Tensor x = images.to(at::kFloat).div_(255.0f);
  if (!normalize) return x;
  const at::Tensor mean =
      at::tensor(at::ArrayRef<float>(stats.mean.data(), stats.channels)).view({1, -1, 1, 1});
  const at::Tensor std =
      at::tensor(at::ArrayRef<float>(stats.std.data(), stats.channels)).view({1, -1, 1, 1});
  return x.sub_(mean).div_(std);
}

}  // namespace data
