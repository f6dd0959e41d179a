// Pathological non-IID partitions, where every client sees only a few classes.
//
// classes_per_client = m: EFL's non-IID(m) setting (Ma et al., arXiv 2106.09433,
// Section 5: "we assign every client samples from exactly m classes"), built as
// NIID-Bench's "#C=m" (Li et al., ICDE 2022, `partition_data`, 'noniid-#label'):
// client k takes the (k mod P)-th of the P classes present in the training set and
// m - 1 other distinct present classes drawn uniformly at random; then each class's
// examples are shuffled and split into near-equal parts (sizes differ by at most
// one) over the clients holding it. Every client holds exactly m classes; a class
// no client drew goes unused. A class with fewer examples than clients holding it
// is an error, since some client would then miss one of its m classes.
//
// shards_per_client = s: FedAvg's pathological split (McMahan et al., AISTATS
// 2017, Section 3): sort the examples by label, cut them into num_clients * s
// shards, give each client s shards at random. Shard j is [N j / S, N (j+1) / S)
// of the sorted order (S shards), so every example is used and shard sizes differ
// by at most one (the usual code fixes the shard size and drops N mod S). A shard
// holds one class, or a few where it straddles class boundaries. Examples are
// shuffled within each class before the sort, so an ordered training file cannot
// leak its order into the shards.
//
//   partition {
//     name: "shards" num_clients: 100
//     options { [type.googleapis.com/fedkit.data.ShardsOptions] { classes_per_client: 2 } }
//   }
//   partition {
//     name: "shards" num_clients: 100
//     options { [type.googleapis.com/fedkit.data.ShardsOptions] { shards_per_client: 2 } }
//   }

#include <algorithm>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "data/partitioners/shards/shards_options.pb.h"
#include "fl/errors.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {
namespace {

using Shares = std::vector<std::vector<int64_t>>;

// Each class's example indices, each list shuffled.
absl::StatusOr<Shares> ShuffledByClass(const fl::PartitionInput& input, std::mt19937_64& rng) {
  Shares by_class(input.num_classes);
  for (size_t i = 0; i < input.labels.size(); ++i) {
    const int64_t y = input.labels[i];
    if (y < 0 || y >= input.num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels[", i, "]: must be in [0, ", input.num_classes, "), got ", y));
    }
    by_class[y].push_back(static_cast<int64_t>(i));
  }
  for (auto& members : by_class) std::shuffle(members.begin(), members.end(), rng);
  return by_class;
}

class ShardsPartitioner : public fl::Partitioner {
 public:
  ShardsPartitioner(int classes_per_client, int shards_per_client)
      : classes_per_client_(classes_per_client), shards_per_client_(shards_per_client) {}

  absl::StatusOr<Shares> Partition(const fl::PartitionInput& input, int num_clients,
                                   std::mt19937_64& rng) const override {
    if (num_clients < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("num_clients: must be >= 1, got ", num_clients));
    }
    FL_ASSIGN_OR_RETURN(Shares by_class, ShuffledByClass(input, rng));
    Shares shares;
    if (classes_per_client_ > 0) {
      FL_ASSIGN_OR_RETURN(shares, ByClasses(by_class, num_clients, rng));
    } else {
      FL_ASSIGN_OR_RETURN(shares, BySortedShards(by_class, num_clients, rng));
    }
    for (auto& share : shares) std::sort(share.begin(), share.end());
    return shares;
  }

 private:
  absl::StatusOr<Shares> ByClasses(const Shares& by_class, int num_clients,
                                   std::mt19937_64& rng) const {
    std::vector<int64_t> present;
    for (int64_t c = 0; c < static_cast<int64_t>(by_class.size()); ++c) {
      if (!by_class[c].empty()) present.push_back(c);
    }
    const int m = classes_per_client_;
    if (m > static_cast<int>(present.size())) {
      return absl::InvalidArgumentError(absl::StrCat("options.classes_per_client: ", m,
                                                     " but the training set has only ",
                                                     present.size(), " classes"));
    }
    // holders[c]: the clients holding class c, in client order.
    std::vector<std::vector<int>> holders(by_class.size());
    std::uniform_int_distribution<size_t> any_class(0, present.size() - 1);
    for (int k = 0; k < num_clients; ++k) {
      std::vector<int64_t> mine = {present[k % present.size()]};
      while (static_cast<int>(mine.size()) < m) {
        const int64_t c = present[any_class(rng)];
        if (std::find(mine.begin(), mine.end(), c) == mine.end()) mine.push_back(c);
      }
      for (int64_t c : mine) holders[c].push_back(k);
    }
    Shares shares(num_clients);
    for (size_t c = 0; c < by_class.size(); ++c) {
      const auto n = static_cast<int64_t>(by_class[c].size());
      const auto t = static_cast<int64_t>(holders[c].size());
      if (t == 0) continue;
      if (n < t) {
        return absl::InvalidArgumentError(absl::StrCat("class ", c, " has ", n, " examples but ", t,
                                                       " clients hold it; use fewer clients "
                                                       "or a smaller options.classes_per_client"));
      }
      for (int64_t j = 0; j < t; ++j) {
        auto& share = shares[holders[c][j]];
        share.insert(share.end(), by_class[c].begin() + n * j / t,
                     by_class[c].begin() + n * (j + 1) / t);
      }
    }
    return shares;
  }

  absl::StatusOr<Shares> BySortedShards(const Shares& by_class, int num_clients,
                                        std::mt19937_64& rng) const {
    std::vector<int64_t> sorted;
    for (const auto& members : by_class)
      sorted.insert(sorted.end(), members.begin(), members.end());
    const auto n = static_cast<int64_t>(sorted.size());
    const int64_t num_shards = int64_t{num_clients} * shards_per_client_;
    if (num_shards > n) {
      return absl::InvalidArgumentError(absl::StrCat(num_clients, " clients x ", shards_per_client_,
                                                     " shards need at least ", num_shards,
                                                     " training examples, got ", n));
    }
    std::vector<int64_t> shard_order(num_shards);
    std::iota(shard_order.begin(), shard_order.end(), 0);
    std::shuffle(shard_order.begin(), shard_order.end(), rng);
    Shares shares(num_clients);
    for (int64_t j = 0; j < num_shards; ++j) {
      const int64_t shard = shard_order[j];
      auto& share = shares[j / shards_per_client_];
      share.insert(share.end(), sorted.begin() + n * shard / num_shards,
                   sorted.begin() + n * (shard + 1) / num_shards);
    }
    return shares;
  }

  int classes_per_client_;  // > 0 in the classes scheme, else 0
  int shards_per_client_;   // > 0 in the sorted-shards scheme, else 0
};

absl::StatusOr<std::unique_ptr<fl::Partitioner>> CreateShards(
    const fedkit::data::ShardsOptions& options, const fl::Partitioner::CreateArgs&) {
  fl::ErrorList errors;
  switch (options.scheme_case()) {
    case fedkit::data::ShardsOptions::kClassesPerClient:
      if (options.classes_per_client() < 1) {
        errors.Add("options.classes_per_client",
                   absl::StrCat("must be >= 1, got ", options.classes_per_client()));
      }
      break;
    case fedkit::data::ShardsOptions::kShardsPerClient:
      if (options.shards_per_client() < 1) {
        errors.Add("options.shards_per_client",
                   absl::StrCat("must be >= 1, got ", options.shards_per_client()));
      }
      break;
    default:
      errors.Add("options", "set one of classes_per_client or shards_per_client");
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<ShardsPartitioner>(options.classes_per_client(),
                                             options.shards_per_client());
}

FL_REGISTER_PLUGIN(fl::Partitioner, "shards", fedkit::data::ShardsOptions, CreateShards);

}  // namespace
}  // namespace data
