#include "aggregators/efl/efl_settings.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/status_macros.h"

namespace aggregators {

absl::StatusOr<EflSettings> ResolveEflHook(const fedkit::aggregators::EflHookOptions& options,
                                           const std::string& path) {
  EflSettings settings;
  if (options.has_lambda()) settings.lambda = options.lambda();
  settings.exclude_self = options.exclude_self();
  settings.per_sample = options.fisher() == fedkit::aggregators::EflHookOptions::PER_SAMPLE;
  if (options.has_fisher_samples()) settings.fisher_samples = options.fisher_samples();
  settings.sums_latest_per_client =
      options.curvature() == fedkit::aggregators::EflHookOptions::LATEST_PER_CLIENT;
  fl::ErrorList errors;
  if (!(settings.lambda >= 0) || !std::isfinite(settings.lambda)) {
    errors.Add(absl::StrCat(path, ".lambda"), absl::StrCat("must be >= 0, got ", settings.lambda));
  }
  if (settings.fisher_samples < 1) {
    errors.Add(absl::StrCat(path, ".fisher_samples"),
               absl::StrCat("must be >= 1, got ", settings.fisher_samples));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return settings;
}

}  // namespace aggregators
