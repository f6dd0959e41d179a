#ifndef DATA_SPLITS_H_
#define DATA_SPLITS_H_

#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"
#include "fl/dataset.h"

namespace data {

// Takes `size` examples from `from`, class-balanced: size / num_classes of each
// class, the remainder one extra each for the lowest classes, chosen at random
// (seeded). Returns {taken, rest}, each in the original order. FailedPrecondition
// when a class has too few examples.
absl::StatusOr<std::pair<fl::Examples, fl::Examples>> TakeClassBalanced(const fl::Examples& from,
                                                                        int64_t size,
                                                                        int64_t num_classes,
                                                                        uint64_t seed);

}  // namespace data

#endif  // DATA_SPLITS_H_
