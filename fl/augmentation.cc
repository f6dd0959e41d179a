#include "fl/augmentation.h"

#include <ATen/ATen.h>

namespace fl {

at::Tensor Augment(const at::Tensor& x, const ImageAugmentation& augmentation,
                   at::Generator& generator) {
  const int64_t n = x.size(0), channels = x.size(1), height = x.size(2), width = x.size(3);
  const int64_t draws = augmentation.per_batch ? 1 : n;
  const auto on_cpu = at::TensorOptions().dtype(at::kLong);
  // One value per image, drawn once per batch when per_batch.
  auto per_image = [&](const at::Tensor& values) {
    return values.to(x.device()).expand({n}).contiguous();
  };
  at::Tensor out = x;
  if (augmentation.crop_padding > 0) {
    const int64_t p = augmentation.crop_padding;
    const at::Tensor padded = at::constant_pad_nd(x, {p, p, p, p}, 0);
    const at::Tensor dy = per_image(at::randint(0, 2 * p + 1, {draws}, generator, on_cpu));
    const at::Tensor dx = per_image(at::randint(0, 2 * p + 1, {draws}, generator, on_cpu));
    const auto arange = [&](int64_t size) { return at::arange(size, dy.options()); };
    // Rows dy .. dy + H - 1, then columns dx .. dx + W - 1, of each padded image.
    const at::Tensor rows = (dy.view({n, 1}) + arange(height))
                                .view({n, 1, height, 1})
                                .expand({n, channels, height, width + 2 * p});
    const at::Tensor cols = (dx.view({n, 1}) + arange(width))
                                .view({n, 1, 1, width})
                                .expand({n, channels, height, width});
    out = padded.gather(2, rows).gather(3, cols);
  }
  if (augmentation.horizontal_flip) {
    const at::Tensor flip =
        per_image(at::rand({draws}, generator, at::TensorOptions()).lt(0.5)).view({n, 1, 1, 1});
    out = at::where(flip, out.flip({3}), out);
  }
  return out;
}

}  // namespace fl
