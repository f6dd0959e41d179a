#ifndef FL_SECAGG_PROTOCOL_H_
#define FL_SECAGG_PROTOCOL_H_

// Secure aggregation (Bonawitz et al., "Practical Secure Aggregation for
// Privacy-Preserving Machine Learning", CCS 2017), with SecAgg+'s sparse neighbour
// graph as an option (Bell et al., CCS 2020). The server learns the sum of the
// surviving clients' vectors in Z_2^32 and nothing else:
//
//   round 0  each client u advertises two X25519 public keys: c_u (to encrypt
//            shares) and s_u (to agree pairwise mask seeds);
//   round 1  u splits its mask-key secret s_u^SK and a fresh self-mask seed b_u into
//            Shamir shares, one per neighbour (itself included), and sends each
//            share encrypted (ChaCha20-Poly1305 under HKDF(X25519(c_u, c_v))) through
//            the server;
//   round 2  u sends y_u = x_u + PRG(b_u) + sum_{v in P(u), u < v} PRG(s_uv)
//            - sum_{v in P(u), v < u} PRG(s_uv), P(u) the neighbours whose shares
//            reached it, s_uv = HKDF(X25519(s_u^SK, s_v));
//   round 3  each survivor reveals, for every neighbour v that shared with it, the
//            share of b_v if v sent y_v, the share of s_v^SK if it did not; the
//            server rebuilds b_v for survivors and s_v^SK for the dropped (each from
//            `threshold` shares), removes the self-masks and the dropped clients'
//            pairwise masks, and is left with sum_u x_u over the survivors.
//
// A client that drops before round 1 is simply out; one that drops after sharing
// but before sending y has its masks recovered; fewer than `threshold` survivors,
// or fewer than `threshold` shares for any secret, aborts the round (an error,
// nothing summed). The server object here sees only what the protocol gives it:
// public keys, ciphertexts, masked vectors and the revealed shares.

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "fl/secagg/crypto.h"
#include "fl/secagg/prg.h"
#include "fl/secagg/shamir.h"

namespace fl::secagg {

// HKDF's info for the pairwise mask seeds s_uv.
inline constexpr char kPairwiseMaskInfo[] = "fedkit secagg mask";

struct SecAggParams {
  // Shares needed to rebuild a secret, and the fewest survivors of a round. >= 2;
  // at most the neighbourhood size (neighbours + 1).
  int threshold = 2;
  // 0: every client is every other's neighbour (SecAgg). k > 0: SecAgg+'s graph,
  // each client joined to the k nearest (k/2 on each side, k rounded up to even)
  // along a random ring drawn from the round's seed.
  int neighbours = 0;
};

struct PublicKeys {
  Seed encryption;
  Seed masking;
};

class SecAggClient {
 public:
  // All key material derives from `seed` (see prg.h): an OsSeed() unless the
  // round is to be replayed, as the protocol's tests do.
  SecAggClient(int64_t id, const Seed& seed);

  int64_t id() const { return id_; }
  PublicKeys AdvertiseKeys() const;

  // Round 1: the encrypted share messages, by recipient. `neighbours` excludes u.
  absl::StatusOr<std::map<int64_t, std::vector<uint8_t>>> ShareKeys(
      const std::map<int64_t, PublicKeys>& cohort, const std::vector<int64_t>& neighbours,
      int threshold);

  // Round 2: y_u for `input`, from the share messages addressed to u.
  absl::StatusOr<std::vector<uint32_t>> MaskedInput(
      absl::Span<const uint32_t> input, const std::map<int64_t, std::vector<uint8_t>>& inbox);

  // Round 3: the shares u holds, by owner: b_v's for v in `survivors`, s_v^SK's for
  // the others. Refuses a survivor set that would make it reveal both of one owner's.
  absl::StatusOr<std::map<int64_t, ShamirShare>> Unmask(const std::set<int64_t>& survivors);

 private:
  struct Held {
    ShamirShare mask_key;
    ShamirShare self_mask;
  };

  int64_t id_;
  KeyPair encryption_;
  KeyPair masking_;
  Seed self_mask_seed_;
  Prg randomness_;
  std::map<int64_t, PublicKeys> cohort_;
  std::map<int64_t, Held> held_;          // shares received, by owner
  std::set<int64_t> revealed_mask_keys_;  // owners whose s^SK share u gave out
  std::set<int64_t> revealed_self_masks_;
};

class SecAggServer {
 public:
  SecAggServer(SecAggParams params, uint64_t seed) : params_(params), seed_(seed) {}

  // Round 0: the cohort's keys. Errors: fewer clients than the threshold, a
  // threshold above the neighbourhood size.
  absl::Status CollectKeys(std::map<int64_t, PublicKeys> keys);
  const std::map<int64_t, PublicKeys>& keys() const { return keys_; }
  // u's neighbours (without u). REQUIRES: CollectKeys succeeded, u in the cohort.
  const std::vector<int64_t>& Neighbours(int64_t u) const { return graph_.at(u); }

  // Round 1: routes `from`'s encrypted shares.
  absl::Status CollectShares(int64_t from, std::map<int64_t, std::vector<uint8_t>> messages);
  std::map<int64_t, std::vector<uint8_t>> Inbox(int64_t to) const;

  // Round 2.
  absl::Status CollectMaskedInput(int64_t from, std::vector<uint32_t> masked);
  std::set<int64_t> Survivors() const;

  // Round 3.
  absl::Status CollectUnmaskShares(int64_t from, std::map<int64_t, ShamirShare> shares);
  // The survivors' sum. Errors (FailedPrecondition, the round aborted): fewer
  // survivors than the threshold, or too few shares to rebuild a secret.
  absl::StatusOr<std::vector<uint32_t>> Sum();

 private:
  SecAggParams params_;
  uint64_t seed_;
  std::map<int64_t, PublicKeys> keys_;
  std::map<int64_t, std::vector<int64_t>> graph_;
  std::map<int64_t, std::map<int64_t, std::vector<uint8_t>>> inboxes_;  // to -> from -> message
  std::set<int64_t> shared_;                                           // U2
  std::map<int64_t, std::vector<uint32_t>> masked_;                     // U3
  std::map<int64_t, std::vector<ShamirShare>> revealed_;                // owner -> shares
};

// The round end to end, in memory: clients `inputs` (equal lengths), of which
// `drop_after_sharing` stop after round 1 and `drop_after_masking` after round 2.
// The server's sum of the survivors' inputs, or its abort.
absl::StatusOr<std::vector<uint32_t>> RunSecAggRound(
    const std::map<int64_t, std::vector<uint32_t>>& inputs, const SecAggParams& params,
    uint64_t seed, const std::set<int64_t>& drop_after_sharing = {},
    const std::set<int64_t>& drop_after_masking = {});

}  // namespace fl::secagg

#endif  // FL_SECAGG_PROTOCOL_H_
