#include "tools/sweep/experiment_check.h"

#include "fl/experiment.h"

namespace sweep {

absl::Status CheckExperiment(const fedkit::ExperimentSpec& spec) {
  return fl::BuildExperiment(spec).status();
}

}  // namespace sweep
