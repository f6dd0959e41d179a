#include "fl/deploy/deployed_run.h"

#include "absl/strings/str_cat.h"
#include "fl/index_files.h"
#include "fl/registry.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/descriptor.h"
#include "fl/spec_loader.h"
#include "fl/status_macros.h"

namespace fl::deploy {

absl::StatusOr<DeployedRun> LoadDeployedRun(const std::string& path, absl::string_view set) {
  DeployedRun run;
  FL_ASSIGN_OR_RETURN(run.spec, LoadSpecFile(ResolveUserPath(path)));
  FL_RETURN_IF_ERROR(ApplyOverride(set, run.spec));
  if (run.spec.server().has_secure_aggregation()) {
    // Its masks are drawn where the simulated clients run: here, the server.
    return absl::FailedPreconditionError(
        "server.secure_aggregation cannot be deployed: the masks are added by the process "
        "that runs the clients' halves of the protocol, which in a deployment would be the "
        "server, so it would see every update");
  }
  FL_ASSIGN_OR_RETURN(run.experiment, BuildExperiment(run.spec));
  if (run.experiment.aggregator->properties().noise_from_seed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "aggregator \"", run.spec.aggregator().name(), "\" draws its privacy noise from the "
        "spec's seed (options.reproducible_noise), which cannot be deployed: the server, which "
        "holds the spec, could subtract that noise again"));
  }
  return run;
}

absl::StatusOr<std::unique_ptr<Dataset>> OwnDataset(const fedkit::ExperimentSpec& spec,
                                                    const std::string& dir) {
  const Registry<Dataset>& registry = Registry<Dataset>::Global();
  const std::string& name = spec.dataset().name();
  FL_ASSIGN_OR_RETURN(std::unique_ptr<google::protobuf::Message> options,
                      registry.UnpackOptions(name, spec.dataset().options()));
  const google::protobuf::FieldDescriptor* field = options->GetDescriptor()->FindFieldByName("dir");
  if (field == nullptr || field->type() != google::protobuf::FieldDescriptor::TYPE_STRING ||
      field->is_repeated()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset \"", name, "\" reads no folder of files (its options have no dir), so a client "
        "cannot bring its own"));
  }
  options->GetReflection()->SetString(options.get(), field, dir);
  google::protobuf::Any packed;
  packed.PackFrom(*options);
  return registry.Create(name, packed);
}

absl::StatusOr<Checkpoint> ReadResumePoint(const std::string& output_dir,
                                           const fedkit::ExperimentSpec& spec,
                                           const c10::Device& device) {
  if (spec.server().has_async()) {
    return absl::FailedPreconditionError(
        "a deployed asynchronous run (server.async) cannot resume: its clients' hook state "
        "cannot be matched to the tasks in flight when the server stopped");
  }
  const std::string path = absl::StrCat(output_dir, "/", kCheckpointFile);
  FL_ASSIGN_OR_RETURN(Checkpoint checkpoint, ReadCheckpoint(path, device));
  FL_ASSIGN_OR_RETURN(fedkit::ExperimentSpec checkpointed, ParseSpec(checkpoint.spec, path));
  if (absl::Status resumable = CheckResumable(checkpointed, spec); !resumable.ok()) {
    return absl::Status(resumable.code(),
                        absl::StrCat("cannot resume from ", path, ": ", resumable.message()));
  }
  return checkpoint;
}

}  // namespace fl::deploy
