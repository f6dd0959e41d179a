// IID partition: shuffle the training set and deal it into equal shares, so every
// client's label mix matches the whole set's in expectation. IID labels with
// unbalanced client sizes are the "unbalanced" partitioner.
//
//   partition { name: "iid" num_clients: 100 }

#include <algorithm>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "data/partitioners/iid/iid_options.pb.h"
#include "fl/partitioner.h"
#include "fl/registry.h"

namespace data {
namespace {

class IidPartitioner : public fl::Partitioner {
 public:
  absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(
      const fl::PartitionInput& input, int num_clients, std::mt19937_64& rng) const override {
    const absl::Span<const int64_t> labels = input.labels;
    const auto n = static_cast<int64_t>(labels.size());
    if (num_clients > n) {
      return absl::InvalidArgumentError(
          absl::StrCat(num_clients, " clients but only ", n, " training examples"));
    }
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::vector<int64_t>> shares(num_clients);
    for (int k = 0; k < num_clients; ++k) {
      const int64_t begin = n * k / num_clients;
      const int64_t end = n * (k + 1) / num_clients;
      shares[k].assign(order.begin() + begin, order.begin() + end);
      std::sort(shares[k].begin(), shares[k].end());
    }
    return shares;
  }
};

absl::StatusOr<std::unique_ptr<fl::Partitioner>> CreateIid(const fedkit::data::IidOptions&,
                                                           const fl::Partitioner::CreateArgs&) {
  return std::make_unique<IidPartitioner>();
}

FL_REGISTER_PLUGIN(fl::Partitioner, "iid", fedkit::data::IidOptions, CreateIid);

}  // namespace
}  // namespace data
