#ifndef FL_SECAGG_PRG_H_
#define FL_SECAGG_PRG_H_

// The pseudo-random generator of secure aggregation: the ChaCha20 keystream
// (OpenSSL's) under a 32-byte seed and a zero nonce. Masks, keys and Shamir
// coefficients all come from it. A client's key material is seeded by the
// operating system (OsSeed), so that no spec, seed or log lets anyone recompute
// it; the protocol's tests seed it from values (SeedFrom) to replay a round.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace fl::secagg {

using Seed = std::array<uint8_t, 32>;

class Prg {
 public:
  explicit Prg(const Seed& seed);
  ~Prg();
  Prg(const Prg&) = delete;
  Prg& operator=(const Prg&) = delete;

  // The next `size` bytes of the keystream.
  void Fill(uint8_t* out, size_t size);
  uint64_t NextUint64();
  Seed NextSeed();
  // The next `count` keystream words, little-endian: a mask in Z_2^32.
  std::vector<uint32_t> Words(size_t count);
  // The same into `out`, so that a long mask can be drawn chunk by chunk.
  void Words(uint32_t* out, size_t count);

 private:
  struct Cipher;
  std::unique_ptr<Cipher> cipher_;
};

// A seed from a 64-bit value and a label: reproducible, so never a secret's.
Seed SeedFrom(uint64_t value, uint64_t label);

// 32 bytes from the operating system's randomness (OpenSSL's RAND_bytes).
// Errors: Unavailable when the OS gives none.
absl::StatusOr<Seed> OsSeed();

}  // namespace fl::secagg

#endif  // FL_SECAGG_PRG_H_
