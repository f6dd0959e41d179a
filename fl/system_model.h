#ifndef FL_SYSTEM_MODEL_H_
#define FL_SYSTEM_MODEL_H_

// Simulated system heterogeneity (client.system, fl/spec.proto SystemSpec): how
// many of the E local steps it is asked for a client completes in a round. Every
// draw comes from the spec's seed and the client (and round), never from which
// worker trains the client, so results do not depend on the workers.

#include <cstdint>

#include "absl/status/status.h"
#include "fl/spec.pb.h"

namespace fl {

class SystemModel {
 public:
  // `rounds`: the run's number of rounds (for late joiners and early leavers).
  SystemModel(fedkit::SystemSpec spec, uint64_t seed, int rounds);

  // Errors name the field under "client.system".
  static absl::Status Check(const fedkit::SystemSpec& spec);

  // Steps completed in `round` (1-based) out of `planned`, in [0, planned].
  int64_t CompletedSteps(int64_t client, int round, int64_t planned) const;

 private:
  fedkit::SystemSpec spec_;
  uint64_t seed_;
  int rounds_;
};

}  // namespace fl

#endif  // FL_SYSTEM_MODEL_H_
