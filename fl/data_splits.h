#ifndef FL_DATA_SPLITS_H_
#define FL_DATA_SPLITS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "fl/dataset.h"
#include "fl/spec.pb.h"

namespace fl {

// Takes `size` examples from `from`, class-balanced: size / num_classes of each
// class, the remainder one extra each for the lowest classes, chosen at random
// (seeded). Returns {taken, rest}, each in the original order. FailedPrecondition
// when a class has too few examples. The choice depends only on `from.y`, `size`,
// `num_classes` and `seed`, never on `from.x`, so the same call with another tensor
// aligned with y as x (per-example owner ids, say) takes the same rows.
absl::StatusOr<std::pair<Examples, Examples>> TakeClassBalanced(const Examples& from,
                                                                        int64_t size,
                                                                        int64_t num_classes,
                                                                        uint64_t seed);

// Per-class counts of FedLAW's long-tailed proxy set (the official code's
// `--longtail_proxyset LT`, nodes.py train_val_split_forServer, imbalance 0.1):
// class c gets floor(size / num_classes * imbalance^(c / (num_classes - 1))), so
// class 0 keeps its balanced share and the last class imbalance times that; the
// total is below `size`. REQUIRES: imbalance in (0, 1], num_classes >= 1.
std::vector<int64_t> LongTailedClassCounts(int64_t size, int64_t num_classes, double imbalance);

// Takes LongTailedClassCounts(size, num_classes, imbalance) examples of each class
// at random (seeded) from `from`, as TakeClassBalanced does (same draw rule, so
// equally reproducible and independent of from.x). FailedPrecondition when a class
// has too few examples or no example would be taken.
absl::StatusOr<std::pair<Examples, Examples>> TakeLongTailed(const Examples& from,
                                                                     int64_t size,
                                                                     int64_t num_classes,
                                                                     double imbalance,
                                                                     uint64_t seed);

// Takes a run's server-held proxy set (server.proxy in the spec) out of `data`:
// from the split proxy.split names, the examples proxy.indices_path lists, in the
// file's order, or else proxy.size examples drawn class-balanced
// (TakeClassBalanced), or long-tailed when proxy.imbalance < 1 (TakeLongTailed),
// in the split's order; the rest stays in that split, in its order. Taken from
// TRAIN, the same rows leave data.train_owners (when defined), so it stays aligned
// with data.train. Returns the proxy set and, in `indices` when not null, its rows
// in the split as it was (what proxy.json holds); with neither size nor file,
// empty Examples and `data` unchanged. Errors about the file name it and the field.
absl::StatusOr<Examples> TakeProxy(const fedkit::ProxySpec& proxy, int64_t num_classes,
                                   uint64_t seed, DatasetSplits& data,
                                   std::vector<int64_t>* indices = nullptr);

}  // namespace fl

#endif  // FL_DATA_SPLITS_H_
