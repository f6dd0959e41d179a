#ifndef DATA_NORMALIZATION_H_
#define DATA_NORMALIZATION_H_

// Per-channel mean and standard deviation of each dataset's training images on the
// [0, 1] pixel scale; inputs become (x / 255 - mean) / std. One table, so every
// dataset plugin and tool uses the same constants. Sources:
//   MNIST          0.1307 / 0.3081: the 60,000 training images (the PyTorch MNIST
//                  example; MA-Echo's noniid.py uses the same).
//   Fashion-MNIST  0.2860 / 0.3530: the 60,000 training images.
//   EMNIST         per split, from its training images (as tabulated in
//                  mila-iqia/ResearchTemplate, datamodules/dataset_normalizations.py);
//                  transposing the images does not change them.
//   CIFAR-10       (0.4914, 0.4822, 0.4465) / (0.2470, 0.2435, 0.2616): the 50,000
//                  training images, population std over all pixels. (Much code uses
//                  std (0.2023, 0.1994, 0.2010), an average of per-image stds.)
//   CIFAR-100      (0.5071, 0.4865, 0.4409) / (0.2673, 0.2564, 0.2762): the 50,000
//                  training images (weiaicunzai/pytorch-cifar100, global_settings.py).
//   CINIC-10       (0.47889522, 0.47227842, 0.43047404) /
//                  (0.24205776, 0.23828046, 0.25874835): the CINIC-10 README (all
//                  270,000 images).

#include <array>

#include <ATen/core/Tensor.h>

namespace data {

struct ChannelStats {
  int channels;
  std::array<float, 3> mean;
  std::array<float, 3> std;
};

inline constexpr ChannelStats kMnistStats{1, {0.1307f}, {0.3081f}};
inline constexpr ChannelStats kFashionMnistStats{1, {0.2860f}, {0.3530f}};
inline constexpr ChannelStats kEmnistByclassStats{1, {0.174f}, {0.332f}};
inline constexpr ChannelStats kEmnistBymergeStats{1, {0.174f}, {0.332f}};
inline constexpr ChannelStats kEmnistBalancedStats{1, {0.175f}, {0.333f}};
inline constexpr ChannelStats kEmnistLettersStats{1, {0.172f}, {0.331f}};
inline constexpr ChannelStats kEmnistDigitsStats{1, {0.173f}, {0.332f}};
inline constexpr ChannelStats kEmnistMnistStats{1, {0.173f}, {0.332f}};
inline constexpr ChannelStats kCifar10Stats{
    3, {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}};
inline constexpr ChannelStats kCifar100Stats{
    3, {0.5071f, 0.4865f, 0.4409f}, {0.2673f, 0.2564f, 0.2762f}};
inline constexpr ChannelStats kCinic10Stats{
    3, {0.47889522f, 0.47227842f, 0.43047404f}, {0.24205776f, 0.23828046f, 0.25874835f}};

// uint8 images of shape {N, C, H, W} (C == stats.channels) to float32 inputs:
// x / 255, then (x - mean[c]) / std[c] per channel when `normalize`.
at::Tensor BytesToInputs(const at::Tensor& images, const ChannelStats& stats, bool normalize);

}  // namespace data

#endif  // DATA_NORMALIZATION_H_
