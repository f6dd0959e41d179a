#ifndef FL_SYSTEM_MODEL_H_
#define FL_SYSTEM_MODEL_H_

// Simulated system heterogeneity (client.system, fl/spec.proto SystemSpec): how
// many of the E local steps it is asked for a client completes in a round, and
// how long its task takes on the virtual clock. Every draw comes from the spec's
// seed and the client (and round), never from which worker trains the client, so
// results do not depend on the workers.

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "fl/client_trace.h"
#include "fl/spec.pb.h"

namespace fl {

class SystemModel {
 public:
  // `rounds`: the run's number of rounds (for late joiners and early leavers).
  // `trace`: the file spec.trace_path names, loaded; null without one.
  SystemModel(fedkit::SystemSpec spec, uint64_t seed, int rounds,
              std::shared_ptr<const ClientTrace> trace = nullptr);

  // Errors name the field under "client.system". The trace file is read later.
  static absl::Status Check(const fedkit::SystemSpec& spec);

  // Steps completed in `round` (1-based) out of `planned`, in [0, planned].
  int64_t CompletedSteps(int64_t client, int round, int64_t planned) const;

  // The client's speed (1 without speed_sigma) and bandwidths in bytes per second
  // (infinite where the spec sets none), drawn once per client, or the trace's.
  double Speed(int64_t client) const;
  double DownloadBandwidth(int64_t client) const;
  double UploadBandwidth(int64_t client) const;

  // Virtual seconds the client needs in `round` to receive `bytes_down`, take the
  // steps CompletedSteps allows out of `planned`, and send `bytes_up`.
  double TaskSeconds(int64_t client, int round, int64_t planned, int64_t bytes_down,
                     int64_t bytes_up) const;

  // Without a trace of online windows, every client is always online.
  bool has_availability() const { return trace_ != nullptr; }
  // The client's first online window ending after `at` (ClientTrace::NextWindow).
  OnlineWindow NextWindow(int64_t client, double at) const;

 private:
  // What is drawn once per client, in the order the draws are made.
  struct Profile {
    int joins = 0;   // first round available; 0: from the start
    int leaves = 0;  // last round available; 0: to the end
    double speed = 1.0;
  };
  Profile ProfileOf(int64_t client) const;
  double BandwidthFactor(int64_t client) const;

  fedkit::SystemSpec spec_;
  uint64_t seed_;
  int rounds_;
  std::shared_ptr<const ClientTrace> trace_;
};

}  // namespace fl

#endif  // FL_SYSTEM_MODEL_H_
