#include "aggregators/maecho/projection_settings.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/status_macros.h"

namespace aggregators {

absl::StatusOr<ProjectionSettings> ResolveProjection(
    const fedkit::aggregators::MaEchoProjectionOptions& options, const std::string& path) {
  ProjectionSettings settings;
  if (options.has_shrink()) settings.shrink = options.shrink();
  if (options.has_linear_regularizer()) settings.linear_regularizer = options.linear_regularizer();
  if (options.has_conv_regularizer()) settings.conv_regularizer = options.conv_regularizer();
  if (options.has_conv_window_stride()) settings.conv_window_stride = options.conv_window_stride();
  settings.components = options.components();
  fl::ErrorList errors;
  auto field = [&path](const char* name) { return absl::StrCat(path, ".", name); };
  if (!(settings.shrink > 0 && settings.shrink <= 1)) {
    errors.Add(field("shrink"), absl::StrCat("must be in (0, 1], got ", settings.shrink));
  }
  if (!(settings.linear_regularizer > 0) || !std::isfinite(settings.linear_regularizer)) {
    errors.Add(field("linear_regularizer"),
               absl::StrCat("must be > 0, got ", settings.linear_regularizer));
  }
  if (!(settings.conv_regularizer > 0) || !std::isfinite(settings.conv_regularizer)) {
    errors.Add(field("conv_regularizer"),
               absl::StrCat("must be > 0, got ", settings.conv_regularizer));
  }
  if (settings.conv_window_stride < 1) {
    errors.Add(field("conv_window_stride"),
               absl::StrCat("must be >= 1, got ", settings.conv_window_stride));
  }
  if (settings.components < 0) {
    errors.Add(field("components"), absl::StrCat("must be >= 0, got ", settings.components));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return settings;
}

}  // namespace aggregators
