// Natural partition: one client per owner id, for datasets that record who each
// training example came from (LEAF's users, e.g. FedProx's synthetic(alpha, beta)
// devices: the "synthetic_leaf" dataset). Client k holds every example of the k-th
// smallest owner id. Deterministic: the seed plays no part. A dataset without owner
// ids is an error.
//
//   partition { name: "natural" num_clients: 30 }

#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "data/partitioners/natural/natural_options.pb.h"
#include "fl/partitioner.h"
#include "fl/registry.h"

namespace data {
namespace {

class NaturalPartitioner : public fl::Partitioner {
 public:
  explicit NaturalPartitioner(bool take_first_owners) : take_first_owners_(take_first_owners) {}

  absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(const fl::PartitionInput& input,
                                                              int num_clients,
                                                              std::mt19937_64&) const override {
    if (num_clients < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_clients: must be >= 1, got ", num_clients));
    }
    if (input.owners.empty()) {
      return absl::FailedPreconditionError(
          "the dataset provides no owner ids, so it has no natural split; use a dataset that "
          "records them (e.g. synthetic_leaf) or another partitioner");
    }
    if (input.owners.size() != input.labels.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the dataset gave ", input.owners.size(),
                                                     " owner ids for ", input.labels.size(),
                                                     " training examples"));
    }
    std::map<int64_t, std::vector<int64_t>> by_owner;
    for (size_t i = 0; i < input.owners.size(); ++i) {
      by_owner[input.owners[i]].push_back(static_cast<int64_t>(i));
    }
    const auto owners = static_cast<int64_t>(by_owner.size());
    if (num_clients > owners || (num_clients < owners && !take_first_owners_)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "num_clients: ", num_clients, " but the training set has ", owners, " owners",
          num_clients < owners ? "; set options.take_first_owners to use only the first ones"
                               : ""));
    }
    std::vector<std::vector<int64_t>> shares;
    for (auto& [owner, members] : by_owner) {
      if (static_cast<int>(shares.size()) == num_clients) break;
      shares.push_back(std::move(members));
    }
    return shares;
  }

 private:
  bool take_first_owners_;
};

absl::StatusOr<std::unique_ptr<fl::Partitioner>> CreateNatural(
    const fedkit::data::NaturalOptions& options, const fl::Partitioner::CreateArgs&) {
  return std::make_unique<NaturalPartitioner>(options.take_first_owners());
}

FL_REGISTER_PLUGIN(fl::Partitioner, "natural", fedkit::data::NaturalOptions, CreateNatural);

}  // namespace
}  // namespace data
