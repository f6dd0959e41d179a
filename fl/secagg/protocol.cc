#include "fl/secagg/protocol.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fl/status_macros.h"

namespace fl::secagg {
namespace {

constexpr char kShareInfo[] = "fedkit secagg share";
constexpr size_t kSecretBytes = 32;

void PutUint64(uint64_t value, std::vector<uint8_t>& out) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

uint64_t GetUint64(const std::vector<uint8_t>& in, size_t& at) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{in[at + i]} << (8 * i);
  at += 8;
  return value;
}

// Adds (sign +1) or subtracts PRG(seed) to `vector`, in Z_2^32.
void ApplyMask(const Seed& seed, int sign, std::vector<uint32_t>& vector) {
  Prg prg(seed);
  // Drawn in cache-sized chunks: a whole model's mask would be one more pass over memory.
  constexpr size_t kChunk = 1 << 14;
  uint32_t mask[kChunk];
  for (size_t begin = 0; begin < vector.size(); begin += kChunk) {
    const size_t count = std::min(kChunk, vector.size() - begin);
    prg.Words(mask, count);
    uint32_t* out = vector.data() + begin;
    if (sign > 0) {
      for (size_t i = 0; i < count; ++i) out[i] += mask[i];
    } else {
      for (size_t i = 0; i < count; ++i) out[i] -= mask[i];
    }
  }
}

// The share holders of `owner`: its neighbours and itself, sorted; share x = index + 1.
std::vector<int64_t> Holders(int64_t owner, const std::vector<int64_t>& neighbours) {
  std::vector<int64_t> holders = neighbours;
  holders.push_back(owner);
  std::sort(holders.begin(), holders.end());
  return holders;
}

}  // namespace

SecAggClient::SecAggClient(int64_t id, const Seed& seed) : id_(id), randomness_(seed) {
  encryption_ = X25519KeyPair(randomness_.NextSeed());
  masking_ = X25519KeyPair(randomness_.NextSeed());
  self_mask_seed_ = randomness_.NextSeed();
}

PublicKeys SecAggClient::AdvertiseKeys() const {
  return {encryption_.public_key, masking_.public_key};
}

absl::StatusOr<std::map<int64_t, std::vector<uint8_t>>> SecAggClient::ShareKeys(
    const std::map<int64_t, PublicKeys>& cohort, const std::vector<int64_t>& neighbours,
    int threshold) {
  cohort_ = cohort;
  const std::vector<int64_t> holders = Holders(id_, neighbours);
  if (threshold < 2 || threshold > static_cast<int>(holders.size())) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: threshold ", threshold,
                                                   " for ", holders.size(), " share holders"));
  }
  const int n = static_cast<int>(holders.size());
  const std::vector<ShamirShare> mask_key =
      ShamirSplit(masking_.private_key, threshold, n, randomness_);
  const std::vector<ShamirShare> self_mask = ShamirSplit(self_mask_seed_, threshold, n, randomness_);
  std::map<int64_t, std::vector<uint8_t>> messages;
  for (int i = 0; i < n; ++i) {
    const int64_t v = holders[i];
    auto keys = cohort.find(v);
    if (keys == cohort.end()) {
      return absl::InvalidArgumentError(absl::StrCat("secagg: neighbour ", v, " has no keys"));
    }
    std::vector<uint8_t> plain;
    PutUint64(static_cast<uint64_t>(id_), plain);
    PutUint64(static_cast<uint64_t>(v), plain);
    PutUint64(mask_key[i].x, plain);
    PutUint64(mask_key[i].y.size(), plain);
    for (uint64_t y : mask_key[i].y) PutUint64(y, plain);
    for (uint64_t y : self_mask[i].y) PutUint64(y, plain);
    FL_ASSIGN_OR_RETURN(Seed key, AgreedKey(encryption_.private_key, keys->second.encryption, kShareInfo));
    messages[v] = Seal(key, static_cast<uint64_t>(id_), plain);
  }
  return messages;
}

absl::StatusOr<std::vector<uint32_t>> SecAggClient::MaskedInput(
    absl::Span<const uint32_t> input, const std::map<int64_t, std::vector<uint8_t>>& inbox) {
  held_.clear();
  std::vector<uint32_t> masked(input.begin(), input.end());
  for (const auto& [owner, message] : inbox) {
    auto keys = cohort_.find(owner);
    if (keys == cohort_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("secagg: a share from ", owner, ", outside the cohort"));
    }
    FL_ASSIGN_OR_RETURN(Seed key, AgreedKey(encryption_.private_key, keys->second.encryption, kShareInfo));
    FL_ASSIGN_OR_RETURN(std::vector<uint8_t> plain, Open(key, static_cast<uint64_t>(owner), message));
    size_t at = 0;
    if (plain.size() < 32) return absl::InvalidArgumentError("secagg: a short share message");
    const int64_t from = static_cast<int64_t>(GetUint64(plain, at));
    const int64_t to = static_cast<int64_t>(GetUint64(plain, at));
    const uint64_t x = GetUint64(plain, at);
    const uint64_t chunks = GetUint64(plain, at);
    if (from != owner || to != id_ || plain.size() != 32 + 16 * chunks) {
      return absl::InvalidArgumentError(absl::StrCat("secagg: the share message from ", owner,
                                                     " is not addressed to ", id_));
    }
    Held held;
    held.mask_key.x = held.self_mask.x = x;
    for (uint64_t c = 0; c < chunks; ++c) held.mask_key.y.push_back(GetUint64(plain, at));
    for (uint64_t c = 0; c < chunks; ++c) held.self_mask.y.push_back(GetUint64(plain, at));
    held_[owner] = std::move(held);
    if (owner == id_) continue;
    FL_ASSIGN_OR_RETURN(Seed pairwise, AgreedKey(masking_.private_key, keys->second.masking, kPairwiseMaskInfo));
    ApplyMask(pairwise, id_ < owner ? +1 : -1, masked);
  }
  ApplyMask(self_mask_seed_, +1, masked);
  return masked;
}

absl::StatusOr<std::map<int64_t, ShamirShare>> SecAggClient::Unmask(
    const std::set<int64_t>& survivors) {
  std::map<int64_t, ShamirShare> revealed;
  for (const auto& [owner, held] : held_) {
    if (survivors.count(owner)) {
      if (revealed_mask_keys_.count(owner)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "secagg: client ", owner, " was called dropped before; refusing its self-mask share"));
      }
      revealed_self_masks_.insert(owner);
      revealed[owner] = held.self_mask;
    } else {
      if (revealed_self_masks_.count(owner)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "secagg: client ", owner, " was called a survivor before; refusing its mask-key share"));
      }
      revealed_mask_keys_.insert(owner);
      revealed[owner] = held.mask_key;
    }
  }
  return revealed;
}

absl::Status SecAggServer::CollectKeys(std::map<int64_t, PublicKeys> keys) {
  keys_ = std::move(keys);
  const int n = static_cast<int>(keys_.size());
  if (n < params_.threshold || params_.threshold < 2) {
    return absl::FailedPreconditionError(absl::StrCat("secagg: ", n, " clients, threshold ",
                                                      params_.threshold));
  }
  std::vector<int64_t> ring;
  for (const auto& [id, unused] : keys_) ring.push_back(id);
  graph_.clear();
  const int half = (params_.neighbours + 1) / 2;
  if (params_.neighbours == 0 || 2 * half >= n - 1) {
    for (int64_t u : ring) {
      for (int64_t v : ring) {
        if (u != v) graph_[u].push_back(v);
      }
    }
  } else {
    std::mt19937_64 shuffle(seed_);
    std::shuffle(ring.begin(), ring.end(), shuffle);
    for (int i = 0; i < n; ++i) {
      for (int d = 1; d <= half; ++d) {
        graph_[ring[i]].push_back(ring[(i + d) % n]);
        graph_[ring[i]].push_back(ring[(i + n - d) % n]);
      }
    }
  }
  const int neighbourhood = static_cast<int>(graph_.begin()->second.size()) + 1;
  if (params_.threshold > neighbourhood) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: threshold ", params_.threshold,
                                                   " exceeds the neighbourhood (", neighbourhood,
                                                   " clients with itself)"));
  }
  inboxes_.clear();
  shared_.clear();
  masked_.clear();
  revealed_.clear();
  return absl::OkStatus();
}

absl::Status SecAggServer::CollectShares(int64_t from,
                                         std::map<int64_t, std::vector<uint8_t>> messages) {
  if (!graph_.count(from)) return absl::InvalidArgumentError(absl::StrCat("secagg: unknown client ", from));
  for (auto& [to, message] : messages) {
    const std::vector<int64_t>& neighbours = graph_.at(from);
    if (to != from && std::find(neighbours.begin(), neighbours.end(), to) == neighbours.end()) {
      return absl::InvalidArgumentError(absl::StrCat("secagg: ", from, " sent a share to ", to,
                                                     ", not its neighbour"));
    }
    inboxes_[to][from] = std::move(message);
  }
  shared_.insert(from);
  return absl::OkStatus();
}

std::map<int64_t, std::vector<uint8_t>> SecAggServer::Inbox(int64_t to) const {
  auto it = inboxes_.find(to);
  if (it == inboxes_.end()) return {};
  std::map<int64_t, std::vector<uint8_t>> inbox;
  for (const auto& [from, message] : it->second) {
    if (shared_.count(from)) inbox[from] = message;
  }
  return inbox;
}

absl::Status SecAggServer::CollectMaskedInput(int64_t from, std::vector<uint32_t> masked) {
  if (!shared_.count(from)) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: ", from, " sent a masked input without sharing its keys"));
  }
  if (!masked_.empty() && masked_.begin()->second.size() != masked.size()) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: ", from, "'s masked input has ",
                                                   masked.size(), " words, the others ",
                                                   masked_.begin()->second.size()));
  }
  masked_[from] = std::move(masked);
  return absl::OkStatus();
}

std::set<int64_t> SecAggServer::Survivors() const {
  std::set<int64_t> survivors;
  for (const auto& [id, unused] : masked_) survivors.insert(id);
  return survivors;
}

absl::Status SecAggServer::CollectUnmaskShares(int64_t from, std::map<int64_t, ShamirShare> shares) {
  if (!masked_.count(from)) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: ", from, " is not a survivor"));
  }
  for (auto& [owner, share] : shares) revealed_[owner].push_back(std::move(share));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint32_t>> SecAggServer::Sum() {
  if (static_cast<int>(masked_.size()) < params_.threshold) {
    return absl::FailedPreconditionError(absl::StrCat("secagg: aborted, ", masked_.size(),
                                                      " survivors, threshold ", params_.threshold));
  }
  std::vector<uint32_t> sum(masked_.begin()->second.size(), 0);
  for (const auto& [u, y] : masked_) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += y[i];
  }
  auto rebuild = [&](int64_t owner) -> absl::StatusOr<Seed> {
    auto it = revealed_.find(owner);
    const size_t have = it == revealed_.end() ? 0 : it->second.size();
    if (static_cast<int>(have) < params_.threshold) {
      return absl::FailedPreconditionError(absl::StrCat("secagg: aborted, ", have, " shares of client ",
                                                        owner, "'s secret, threshold ", params_.threshold));
    }
    FL_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                        ShamirReconstruct(it->second, params_.threshold, kSecretBytes));
    Seed seed;
    std::copy(bytes.begin(), bytes.end(), seed.begin());
    return seed;
  };
  for (const auto& [u, unused] : masked_) {
    FL_ASSIGN_OR_RETURN(Seed self_mask, rebuild(u));
    ApplyMask(self_mask, -1, sum);
  }
  for (int64_t v : shared_) {
    if (masked_.count(v)) continue;
    FL_ASSIGN_OR_RETURN(Seed mask_key, rebuild(v));
    for (int64_t u : graph_.at(v)) {
      if (!masked_.count(u)) continue;
      FL_ASSIGN_OR_RETURN(Seed pairwise, AgreedKey(mask_key, keys_.at(u).masking, kPairwiseMaskInfo));
      // u added +PRG(s_uv) when u < v, -PRG(s_uv) otherwise: take it back.
      ApplyMask(pairwise, u < v ? -1 : +1, sum);
    }
  }
  return sum;
}

absl::StatusOr<std::vector<uint32_t>> RunSecAggRound(
    const std::map<int64_t, std::vector<uint32_t>>& inputs, const SecAggParams& params,
    uint64_t seed, const std::set<int64_t>& drop_after_sharing,
    const std::set<int64_t>& drop_after_masking) {
  SecAggServer server(params, seed);
  std::map<int64_t, std::unique_ptr<SecAggClient>> clients;
  std::map<int64_t, PublicKeys> keys;
  for (const auto& [id, unused] : inputs) {
    clients[id] = std::make_unique<SecAggClient>(id, SeedFrom(seed, static_cast<uint64_t>(id)));
    keys[id] = clients[id]->AdvertiseKeys();
  }
  FL_RETURN_IF_ERROR(server.CollectKeys(keys));
  for (auto& [id, client] : clients) {
    FL_ASSIGN_OR_RETURN(auto messages,
                        client->ShareKeys(server.keys(), server.Neighbours(id), params.threshold));
    FL_RETURN_IF_ERROR(server.CollectShares(id, std::move(messages)));
  }
  for (auto& [id, client] : clients) {
    if (drop_after_sharing.count(id)) continue;
    FL_ASSIGN_OR_RETURN(std::vector<uint32_t> masked,
                        client->MaskedInput(inputs.at(id), server.Inbox(id)));
    FL_RETURN_IF_ERROR(server.CollectMaskedInput(id, std::move(masked)));
  }
  const std::set<int64_t> survivors = server.Survivors();
  for (auto& [id, client] : clients) {
    if (!survivors.count(id) || drop_after_masking.count(id)) continue;
    FL_ASSIGN_OR_RETURN(auto shares, client->Unmask(survivors));
    FL_RETURN_IF_ERROR(server.CollectUnmaskShares(id, std::move(shares)));
  }
  return server.Sum();
}

}  // namespace fl::secagg
