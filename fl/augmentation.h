#ifndef FL_AUGMENTATION_H_
#define FL_AUGMENTATION_H_

// Training-time image augmentation (ImageAugmentation in fl/dataset.h): random
// crops of the zero-padded image and horizontal flips, as CIFAR training commonly
// uses (RandomCrop(32, padding=4) and RandomHorizontalFlip).

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "fl/dataset.h"

namespace fl {

// `x` {N, C, H, W} augmented as `augmentation` says, drawing from `generator` (a CPU
// generator; the result is on x's device). `x` itself is not modified.
at::Tensor Augment(const at::Tensor& x, const ImageAugmentation& augmentation,
                   at::Generator& generator);

}  // namespace fl

#endif  // FL_AUGMENTATION_H_
