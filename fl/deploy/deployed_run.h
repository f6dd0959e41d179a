#ifndef FL_DEPLOY_DEPLOYED_RUN_H_
#define FL_DEPLOY_DEPLOYED_RUN_H_

// What fl_server and fl_client each start from: the spec file with the command
// line's --set merged in, and the experiment built from it.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fl/checkpoint.h"
#include "fl/dataset.h"
#include "fl/experiment.h"
#include "fl/spec.pb.h"

namespace fl::deploy {

struct DeployedRun {
  fedkit::ExperimentSpec spec;
  Experiment experiment;
};

// `path` relative as ResolveUserPath takes it; `set` may be empty. Errors are the
// spec loader's and BuildExperiment's, and a spec a deployment cannot run
// (secure aggregation, whose masks the server would draw for its clients).
absl::StatusOr<DeployedRun> LoadDeployedRun(const std::string& path, absl::string_view set);

// A client's own data (fl_client --data_dir): the spec's dataset, with its
// options but reading the files in `dir` (its plugin's `dir` option), so they must
// be in that dataset's format. Errors: a dataset that reads no folder (its options
// have no `dir`), and the plugin's own (missing files are found only on loading).
absl::StatusOr<std::unique_ptr<Dataset>> OwnDataset(const fedkit::ExperimentSpec& spec,
                                                    const std::string& dir);

// The checkpoint in `output_dir` of a deployed run of `spec`, to resume it: the
// checkpoint's spec may differ from `spec` only where a resume may
// (CheckResumable). Refused for asynchronous runs: a client's hook state cannot
// be matched to the tasks in flight when the server stopped. Errors name the file.
absl::StatusOr<Checkpoint> ReadResumePoint(const std::string& output_dir,
                                           const fedkit::ExperimentSpec& spec,
                                           const c10::Device& device);

}  // namespace fl::deploy

#endif  // FL_DEPLOY_DEPLOYED_RUN_H_
