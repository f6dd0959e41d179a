#include "fl/secure_aggregation.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "fl/seeding.h"
#include "fl/status_macros.h"

namespace fl {
namespace {

// Bytes of one Shamir share on the wire: its x and its field elements.
int64_t ShareBytes(const secagg::ShamirShare& share) {
  return static_cast<int64_t>(sizeof(share.x) + share.y.size() * sizeof(uint64_t));
}

constexpr int64_t kKeysBytes = 2 * sizeof(secagg::Seed);

// The encoding's stochastic rounding draws from the round's seed: it protects
// nothing and keeps runs reproducible. Key material (secrets, self-mask seeds,
// Shamir coefficients) comes from the OS instead: a server that could recompute
// it from the spec would unmask every update. The unmasked sum does not depend
// on it.
constexpr uint64_t kRoundingStream = 2;

secagg::Seed RoundingSeed(uint64_t round_seed, int64_t client) {
  return secagg::SeedFrom(DeriveSeed(round_seed, SeedStream::kSecureAggregation,
                                     {static_cast<uint64_t>(client), kRoundingStream}),
                          0);
}

}  // namespace

int NeighbourhoodSize(int cohort_size, int neighbours) {
  const int half = (neighbours + 1) / 2;
  if (neighbours == 0 || 2 * half >= cohort_size - 1) return cohort_size;
  return 2 * half + 1;
}

int DefaultThreshold(int cohort_size, int neighbours) {
  return std::max(2, NeighbourhoodSize(cohort_size, neighbours) / 2 + 1);
}

SecureAggregationRound::SecureAggregationRound(const SecureAggregationConfig& config,
                                               int threshold, secagg::FixedPoint encoding,
                                               std::map<std::string, at::Tensor> layout,
                                               uint64_t seed)
    : config_(config),
      threshold_(threshold),
      encoding_(encoding),
      layout_(std::move(layout)),
      seed_(seed),
      server_({threshold, config.neighbours}, seed) {
  for (const auto& [name, tensor] : layout_) length_ += tensor.numel();
}

absl::StatusOr<std::unique_ptr<SecureAggregationRound>> SecureAggregationRound::Start(
    const SecureAggregationConfig& config, const std::vector<int64_t>& cohort,
    const std::map<std::string, at::Tensor>& layout, uint64_t seed) {
  if (!(config.update_norm_bound > 0) || !(config.max_weight > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secure aggregation: update_norm_bound and max_weight must be > 0, got ",
        config.update_norm_bound, " and ", config.max_weight));
  }
  const int n = static_cast<int>(cohort.size());
  const int threshold =
      config.threshold > 0 ? config.threshold : DefaultThreshold(n, config.neighbours);
  const int neighbourhood = NeighbourhoodSize(n, config.neighbours);
  if (n < 2 || threshold > neighbourhood) {
    return absl::FailedPreconditionError(
        absl::StrCat("secure aggregation: ", n, " clients in the round, a neighbourhood of ",
                     neighbourhood, ", fewer than the threshold ", threshold));
  }
  const double b = std::max(1.0, config.update_norm_bound);
  const double range = config.value_range > 0 ? config.value_range : config.max_weight * b * b;
  FL_ASSIGN_OR_RETURN(secagg::FixedPoint encoding, secagg::FixedPoint::Create(range, n));
  auto round = std::unique_ptr<SecureAggregationRound>(
      new SecureAggregationRound(config, threshold, encoding, layout, seed));

  std::map<int64_t, secagg::PublicKeys> keys;
  for (int64_t id : cohort) {
    absl::StatusOr<secagg::Seed> keys_seed = secagg::OsSeed();
    if (!keys_seed.ok()) {
      return absl::UnavailableError(
          absl::StrCat("secure aggregation: client ", id, "'s keys: ", keys_seed.status().message()));
    }
    auto client = std::make_unique<secagg::SecAggClient>(id, *keys_seed);
    keys[id] = client->AdvertiseKeys();
    round->clients_[id] = std::move(client);
  }
  FL_RETURN_IF_ERROR(round->server_.CollectKeys(keys));
  for (auto& [id, client] : round->clients_) {
    const std::vector<int64_t>& neighbours = round->server_.Neighbours(id);
    FL_ASSIGN_OR_RETURN(auto messages,
                        client->ShareKeys(round->server_.keys(), neighbours, threshold));
    round->bytes_up_ += kKeysBytes;
    round->bytes_down_ += kKeysBytes * static_cast<int64_t>(neighbours.size());
    for (const auto& [to, message] : messages) {
      round->bytes_up_ += static_cast<int64_t>(message.size());
    }
    FL_RETURN_IF_ERROR(round->server_.CollectShares(id, std::move(messages)));
  }
  return round;
}

absl::Status SecureAggregationRound::Contribute(const ClientUpdate& update,
                                                Aggregator& client_side, const ModelState& global,
                                                const ServerContext& context) {
  const int64_t id = update.client_id;
  auto client = clients_.find(id);
  if (client == clients_.end() || contributed_.count(id)) {
    return absl::InternalError(
        absl::StrCat("secure aggregation: client ", id, " is not in the round or sent twice"));
  }
  ClientUpdate clipped = CloneUpdate(update);
  if (clipped.delta.ClipParameterNorm(config_.update_norm_bound)) ++clipped_updates_;
  ServerContext own = context;
  FL_RETURN_IF_ERROR(client_side.Configure(global, own).status());
  FL_RETURN_IF_ERROR(client_side.Accumulate(std::move(clipped), own));
  std::optional<std::map<std::string, at::Tensor>> sums = client_side.PartialSums();
  if (!sums.has_value()) {
    return absl::InternalError("secure aggregation: the aggregator has no partial sums");
  }
  std::vector<double> values;
  values.reserve(length_);
  for (const auto& [name, shape] : layout_) {
    auto it = sums->find(name);
    if (it == sums->end() || !it->second.sizes().equals(shape.sizes())) {
      return absl::InternalError(absl::StrCat("secure aggregation: client ", id,
                                              "'s partial sum \"", name,
                                              "\" is missing or of another shape"));
    }
    const at::Tensor flat = it->second.to(at::kCPU, at::kDouble).contiguous().view({-1});
    values.insert(values.end(), flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
  }
  if (sums->size() != layout_.size()) {
    return absl::InternalError(absl::StrCat("secure aggregation: client ", id, " has ",
                                            sums->size(), " partial sums, the server ",
                                            layout_.size()));
  }
  secagg::Prg rounding(RoundingSeed(seed_, id));
  int64_t saturated = 0;
  const std::vector<uint32_t> encoded = encoding_.Encode(values, rounding, &saturated);
  saturated_values_ += saturated;
  // Inbox copies every message addressed to the client: take it once.
  const std::map<int64_t, std::vector<uint8_t>> inbox = server_.Inbox(id);
  FL_ASSIGN_OR_RETURN(std::vector<uint32_t> masked, client->second->MaskedInput(encoded, inbox));
  for (const auto& [from, message] : inbox) {
    bytes_down_ += static_cast<int64_t>(message.size());
  }
  bytes_up_ += static_cast<int64_t>(masked.size() * sizeof(uint32_t));
  FL_RETURN_IF_ERROR(server_.CollectMaskedInput(id, std::move(masked)));
  contributed_.insert(id);
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, at::Tensor>> SecureAggregationRound::Unmask() {
  const std::set<int64_t> survivors = server_.Survivors();
  if (static_cast<int>(survivors.size()) < threshold_) {
    return absl::FailedPreconditionError(
        absl::StrCat("secure aggregation: ", survivors.size(),
                     " clients contributed, fewer than the threshold ", threshold_));
  }
  for (int64_t id : survivors) {
    FL_ASSIGN_OR_RETURN(auto shares, clients_.at(id)->Unmask(survivors));
    for (const auto& [owner, share] : shares) bytes_up_ += ShareBytes(share);
    FL_RETURN_IF_ERROR(server_.CollectUnmaskShares(id, std::move(shares)));
  }
  FL_ASSIGN_OR_RETURN(std::vector<uint32_t> sum, server_.Sum());
  const std::vector<double> decoded = encoding_.DecodeSum(sum);
  std::map<std::string, at::Tensor> sums;
  size_t offset = 0;
  for (const auto& [name, shape] : layout_) {
    at::Tensor values =
        at::tensor(std::vector<double>(decoded.begin() + offset,
                                       decoded.begin() + offset + shape.numel()),
                   at::kDouble)
            .view(shape.sizes());
    offset += shape.numel();
    // Integers (counts) come back exact; rounding only removes float noise.
    if (!at::isFloatingType(shape.scalar_type())) values = values.round();
    sums[name] = values.to(shape.device(), shape.scalar_type());
  }
  return sums;
}

}  // namespace fl
