#include "fl/augmentation.h"

#include <set>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "gtest/gtest.h"

namespace fl {
namespace {

at::Generator Seeded(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

// 16 distinct 2x5x5 images: every pixel value differs.
at::Tensor Images() { return at::arange(16 * 2 * 5 * 5, at::kFloat).view({16, 2, 5, 5}); }

// The offset (dy, dx) at which `image` is a window of `padded`; (-1, -1) if none.
std::pair<int, int> WindowOffset(const at::Tensor& padded, const at::Tensor& image, int p) {
  for (int dy = 0; dy <= 2 * p; ++dy) {
    for (int dx = 0; dx <= 2 * p; ++dx) {
      if (padded.narrow(1, dy, image.size(1)).narrow(2, dx, image.size(2)).equal(image)) {
        return {dy, dx};
      }
    }
  }
  return {-1, -1};
}

TEST(AugmentTest, CropsAreWindowsOfThePaddedImageAtRandomOffsets) {
  const at::Tensor x = Images();
  at::Generator generator = Seeded(1);
  const at::Tensor out = Augment(x, {.crop_padding = 2}, generator);
  ASSERT_EQ(out.sizes(), x.sizes());
  const at::Tensor padded = at::constant_pad_nd(x, {2, 2, 2, 2}, 0);
  std::set<std::pair<int, int>> offsets;
  for (int64_t i = 0; i < 16; ++i) {
    const auto offset = WindowOffset(padded[i], out[i], 2);
    ASSERT_NE(offset.first, -1) << "image " << i << " is not a window";
    offsets.insert(offset);
  }
  EXPECT_GT(offsets.size(), 4u);  // 25 possible offsets over 16 images
}

TEST(AugmentTest, PerBatchUsesOneOffsetAndOneFlipForEveryImage) {
  const at::Tensor x = Images();
  at::Generator generator = Seeded(2);
  const at::Tensor out =
      Augment(x, {.crop_padding = 2, .horizontal_flip = true, .per_batch = true}, generator);
  // Undo the flip if the batch was flipped: then each image is a window at the
  // same offset.
  const at::Tensor padded = at::constant_pad_nd(x, {2, 2, 2, 2}, 0);
  const bool flipped = WindowOffset(padded[0], out[0], 2).first == -1;
  const at::Tensor unflipped = flipped ? out.flip({3}) : out;
  const auto first = WindowOffset(padded[0], unflipped[0], 2);
  ASSERT_NE(first.first, -1);
  for (int64_t i = 1; i < 16; ++i) EXPECT_EQ(WindowOffset(padded[i], unflipped[i], 2), first);
}

TEST(AugmentTest, FlipsMirrorAboutHalfTheImages) {
  const at::Tensor x = at::randn({64, 3, 4, 4});
  at::Generator generator = Seeded(3);
  const at::Tensor out = Augment(x, {.horizontal_flip = true}, generator);
  int flipped = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const bool same = out[i].equal(x[i]);
    const bool mirrored = out[i].equal(x[i].flip({2}));
    ASSERT_TRUE(same != mirrored) << "image " << i;
    flipped += mirrored;
  }
  EXPECT_GT(flipped, 16);
  EXPECT_LT(flipped, 48);
}

TEST(AugmentTest, TheSameSeedGivesTheSameBatchAndTheInputIsLeftAlone) {
  const at::Tensor x = Images();
  const at::Tensor copy = x.clone();
  const ImageAugmentation augmentation{.crop_padding = 1, .horizontal_flip = true};
  at::Generator a = Seeded(7), b = Seeded(7), c = Seeded(8);
  const at::Tensor first = Augment(x, augmentation, a);
  EXPECT_TRUE(first.equal(Augment(x, augmentation, b)));
  EXPECT_FALSE(first.equal(Augment(x, augmentation, c)));
  EXPECT_TRUE(x.equal(copy));
}

}  // namespace
}  // namespace fl
