#include "fl/deploy/deployed_run.h"

#include "fl/index_files.h"
#include "fl/spec_loader.h"
#include "fl/status_macros.h"

namespace fl::deploy {

absl::StatusOr<DeployedRun> LoadDeployedRun(const std::string& path, absl::string_view set) {
  DeployedRun run;
  FL_ASSIGN_OR_RETURN(run.spec, LoadSpecFile(ResolveUserPath(path)));
  FL_RETURN_IF_ERROR(ApplyOverride(set, run.spec));
  FL_ASSIGN_OR_RETURN(run.experiment, BuildExperiment(run.spec));
  return run;
}

}  // namespace fl::deploy
