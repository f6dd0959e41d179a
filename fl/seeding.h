#ifndef FL_SEEDING_H_
#define FL_SEEDING_H_

// Independent, reproducible random streams derived from the spec's one seed, so
// that e.g. client 7's batching in round 3 does not depend on which worker trained
// it or on how many clients trained before it. (absl::Hash is salted per process,
// so it cannot serve here.)

#include <cstdint>
#include <initializer_list>

namespace fl {

// Stream tags, so different uses of the same (round, client) never share a stream.
enum class SeedStream : uint64_t {
  kPartition = 1,
  kInitialModel = 2,
  kClientSampling = 3,
  kLocalTraining = 4,
  kHook = 5,
  kServerRound = 6,
  kProxySplit = 7,
  kModelNoise = 8,
  kAugmentation = 9,
  kSystem = 10,
  kFault = 11,
  kSecureAggregation = 12,
  kBandwidth = 13,
  kAsyncDispatch = 14,
  kClientEvaluation = 15,
  kFineTune = 16,
};

// SplitMix64 finaliser over the seed, the stream and each extra value in turn.
inline uint64_t DeriveSeed(uint64_t seed, SeedStream stream,
                           std::initializer_list<uint64_t> values = {}) {
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(seed ^ mix(static_cast<uint64_t>(stream)));
  for (uint64_t v : values) h = mix(h ^ mix(v));
  return h;
}

}  // namespace fl

#endif  // FL_SEEDING_H_
