#ifndef FL_SECAGG_CRYPTO_H_
#define FL_SECAGG_CRYPTO_H_

// The public-key and symmetric primitives of secure aggregation, from OpenSSL:
// X25519 key agreement with HKDF-SHA256 on the shared secret (the pairwise mask
// seeds and the keys that encrypt Shamir shares between two clients), and
// ChaCha20-Poly1305 to encrypt those shares so that the server, which routes them,
// cannot read them.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fl/secagg/prg.h"

namespace fl::secagg {

struct KeyPair {
  Seed private_key;
  Seed public_key;
};

// The X25519 key pair whose private key is `private_key`.
KeyPair X25519KeyPair(const Seed& private_key);

// HKDF-SHA256(X25519(own_private, peer_public), info): the same for both ends of a
// pair. Errors: a peer key that gives the all-zero shared secret (a small-order point).
absl::StatusOr<Seed> AgreedKey(const Seed& own_private, const Seed& peer_public,
                               absl::string_view info);

// ChaCha20-Poly1305 under `key` with a 96-bit nonce made from `nonce`; the
// ciphertext carries its 16-byte tag. Open fails (InvalidArgument) on a wrong key,
// nonce or a modified ciphertext.
std::vector<uint8_t> Seal(const Seed& key, uint64_t nonce, absl::Span<const uint8_t> plaintext);
absl::StatusOr<std::vector<uint8_t>> Open(const Seed& key, uint64_t nonce,
                                          absl::Span<const uint8_t> ciphertext);

}  // namespace fl::secagg

#endif  // FL_SECAGG_CRYPTO_H_
