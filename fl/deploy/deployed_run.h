#ifndef FL_DEPLOY_DEPLOYED_RUN_H_
#define FL_DEPLOY_DEPLOYED_RUN_H_

// What fl_server and fl_client each start from: the spec file with the command
// line's --set merged in, and the experiment built from it.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fl/experiment.h"
#include "fl/spec.pb.h"

namespace fl::deploy {

struct DeployedRun {
  fedkit::ExperimentSpec spec;
  Experiment experiment;
};

// `path` relative as ResolveUserPath takes it; `set` may be empty. Errors are the
// spec loader's and BuildExperiment's.
absl::StatusOr<DeployedRun> LoadDeployedRun(const std::string& path, absl::string_view set);

}  // namespace fl::deploy

#endif  // FL_DEPLOY_DEPLOYED_RUN_H_
