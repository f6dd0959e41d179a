#ifndef AGGREGATORS_EFL_EFL_SETTINGS_H_
#define AGGREGATORS_EFL_EFL_SETTINGS_H_

// EflHookOptions with defaults filled in and checked, shared by the client hook and
// the aggregator (which checks them when the spec is read), and the names of the
// tensors the two halves exchange.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "aggregators/efl/efl_options.pb.h"

namespace aggregators {

// Extras each client sends and broadcasts the server sends: u_k = I_k and
// v_k = I_k (.) w_k up, their sums U and V down (parameters only, model order).
inline constexpr char kEflU[] = "efl_u";
inline constexpr char kEflV[] = "efl_v";

struct EflSettings {
  double lambda = 0.1;
  bool exclude_self = false;
  bool per_sample = false;
  int64_t fisher_samples = 500;
  bool sums_latest_per_client = false;
};

// Errors name the field under `path` (e.g. "options.client").
absl::StatusOr<EflSettings> ResolveEflHook(const fedkit::aggregators::EflHookOptions& options,
                                           const std::string& path);

}  // namespace aggregators

#endif  // AGGREGATORS_EFL_EFL_SETTINGS_H_
