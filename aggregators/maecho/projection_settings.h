#ifndef AGGREGATORS_MAECHO_PROJECTION_SETTINGS_H_
#define AGGREGATORS_MAECHO_PROJECTION_SETTINGS_H_

// MaEchoProjectionOptions with the code's defaults filled in and checked, shared
// by the client hook and the aggregator (which checks them when the spec is read).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "aggregators/maecho/maecho_options.pb.h"

namespace aggregators {

struct ProjectionSettings {
  double shrink = 0.5;
  double linear_regularizer = 0.025118864315095794;  // 0.01^0.8
  double conv_regularizer = 1e-4;
  int64_t conv_window_stride = 2;
  int64_t components = 0;
};

// Errors name the field under `path` (e.g. "options.projection").
absl::StatusOr<ProjectionSettings> ResolveProjection(
    const fedkit::aggregators::MaEchoProjectionOptions& options, const std::string& path);

}  // namespace aggregators

#endif  // AGGREGATORS_MAECHO_PROJECTION_SETTINGS_H_
