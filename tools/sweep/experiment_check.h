#ifndef TOOLS_SWEEP_EXPERIMENT_CHECK_H_
#define TOOLS_SWEEP_EXPERIMENT_CHECK_H_

// The runner's own validation of a resolved spec, so a sweep finds every bad
// variant before it starts anything. The only file of the tool that sees
// LibTorch's headers (through fl/experiment.h): the rest compiles in seconds.

#include "absl/status/status.h"
#include "fl/spec.pb.h"

namespace sweep {

// OK when run_experiment would accept `spec`: fl::BuildExperiment's checks of the
// core fields and of every plugin and its options, one problem per line, each
// naming its field ("aggregator (elastic): options: ..."). Loads no data.
absl::Status CheckExperiment(const fedkit::ExperimentSpec& spec);

}  // namespace sweep

#endif  // TOOLS_SWEEP_EXPERIMENT_CHECK_H_
