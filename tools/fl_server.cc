// The server of a deployed run: the spec's server side, with every client in
// another process (bazel run //tools:fl_client) that dials this one over TLS.
//
//   bazel run //tools:fl_server -- --spec=SPEC --listen=0.0.0.0:50051
//       --tls_cert=server.pem --tls_key=server.key [--tls_client_ca=ca.pem]
//       --tokens=tokens.txt [--output_dir=DIR] [--set=...] [--resume]
//
// tokens.txt holds "<client id> <token>" per line, one per client of the spec. A
// client's task that is not answered within --task_deadline_seconds fails its
// training for that round; a round goes on with the others (down to
// server.min_accepted_updates). Checkpoints go to the output folder as
// output.checkpoint_every says; after a crash or a stop (SIGINT, SIGTERM: after
// the round in progress), --resume continues from the last one, and the clients,
// which keep reconnecting, rejoin with their hook state as it was then.
// Exit codes: 0 done, 1 the run failed, 2 the command line, spec or files are
// wrong, 3 stopped by a signal (continue with --resume).

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "fl/deploy/coordinator.h"
#include "fl/deploy/deployed_run.h"
#include "fl/deploy/remote_client.h"
#include "fl/deploy/run_identity.h"
#include "fl/deploy/tls.h"
#include "fl/checkpoint.h"
#include "fl/experiment.h"
#include "fl/index_files.h"
#include "fl/spec_loader.h"
#include "fl/stop_request.h"
#include "glog/logging.h"
#include "grpcpp/server_builder.h"

ABSL_FLAG(std::string, spec, "", "Path of the ExperimentSpec text proto.");
ABSL_FLAG(std::string, set, "", "Text-format fragment merged into the spec.");
ABSL_FLAG(std::string, output_dir, "", "Where results go (default: the spec's output.dir).");
ABSL_FLAG(std::string, listen, "127.0.0.1:50051", "Address to listen on; port 0 picks one.");
ABSL_FLAG(std::string, tls_cert, "", "The server's certificate chain (PEM). Required.");
ABSL_FLAG(std::string, tls_key, "", "The server's private key (PEM). Required.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "A CA (PEM): clients must present a certificate it signed (mutual TLS).");
ABSL_FLAG(std::string, tokens, "", "File of \"<client id> <token>\" lines. Required.");
ABSL_FLAG(double, task_deadline_seconds, 600, "How long a client has for one task.");
ABSL_FLAG(double, connect_timeout_seconds, 600,
          "How long a task waits for its client to connect or reconnect.");
ABSL_FLAG(int64_t, max_payload_mb, 1024, "The largest answer a client may send, in MiB.");
ABSL_FLAG(int64_t, max_message_kb, 4096,
          "The largest gRPC message this server accepts, in KiB (>= 64); clients send chunks "
          "that fit.");
ABSL_FLAG(bool, resume, false,
          "Continue the run whose checkpoint.fkc is in the output folder (same spec, up to what "
          "a resume may change).");
ABSL_FLAG(std::string, port_file, "",
          "When set, the port listened on is written there once listening (for scripts).");

namespace {

int Fail(int code, const absl::Status& status) {
  std::fprintf(stderr, "fl_server: %s\n", std::string(status.message()).c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  absl::StatusOr<fl::deploy::DeployedRun> run =
      fl::deploy::LoadDeployedRun(absl::GetFlag(FLAGS_spec), absl::GetFlag(FLAGS_set));
  if (!run.ok()) return Fail(2, run.status());
  const fedkit::ExperimentSpec& spec = run->spec;
  fl::Experiment& experiment = run->experiment;
  std::string output_dir = absl::GetFlag(FLAGS_output_dir);
  if (output_dir.empty()) output_dir = fl::OutputDirOf(spec);
  output_dir = fl::ResolveUserPath(output_dir);
  std::optional<fl::Checkpoint> checkpoint;
  if (absl::GetFlag(FLAGS_resume)) {
    absl::StatusOr<fl::Checkpoint> read =
        fl::deploy::ReadResumePoint(output_dir, spec, experiment.device);
    if (!read.ok()) return Fail(2, read.status());
    checkpoint = *std::move(read);
  }
  absl::StatusOr<std::map<int64_t, std::string>> tokens =
      fl::deploy::ReadTokens(absl::GetFlag(FLAGS_tokens));
  if (!tokens.ok()) return Fail(2, tokens.status());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = fl::deploy::ServerTls(
      {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
       absl::GetFlag(FLAGS_tls_client_ca)});
  if (!credentials.ok()) return Fail(2, credentials.status());

  fl::deploy::CoordinatorOptions options;
  options.tokens = *std::move(tokens);
  options.spec_digest = fl::deploy::SpecDigest(spec);
  absl::StatusOr<fl::deploy::PayloadLimits> limits = fl::deploy::PayloadLimitsFromFlags(
      absl::GetFlag(FLAGS_max_payload_mb), absl::GetFlag(FLAGS_max_message_kb));
  if (!limits.ok()) return Fail(2, limits.status());
  options.limits = *limits;
  options.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout_seconds));
  options.asynchronous = spec.server().has_async();
  options.checkpoint_every = spec.output().checkpoint_every();
  options.resumed_after_round = checkpoint.has_value() ? checkpoint->server.rounds_done : 0;
  fl::deploy::Coordinator coordinator(options);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen), *credentials, &port);
  builder.RegisterService(&coordinator);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.limits.max_message_bytes));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return Fail(2, absl::UnavailableError(
                       absl::StrCat("cannot listen on ", absl::GetFlag(FLAGS_listen))));
  }
  LOG(INFO) << "fl_server: listening on port " << port << "; spec digest " << options.spec_digest;
  if (const std::string path = absl::GetFlag(FLAGS_port_file); !path.empty()) {
    FILE* file = std::fopen(path.c_str(), "w");
    if (file == nullptr) return Fail(2, absl::NotFoundError(absl::StrCat("cannot write ", path)));
    std::fprintf(file, "%d\n", port);
    std::fclose(file);
  }

  const absl::Duration deadline = absl::Seconds(absl::GetFlag(FLAGS_task_deadline_seconds));
  const c10::Device device = experiment.device;
  auto reach = [&](std::vector<std::unique_ptr<fl::Client>> in_process)
      -> absl::StatusOr<std::vector<std::unique_ptr<fl::Client>>> {
    std::vector<std::unique_ptr<fl::Client>> remote;
    for (const std::unique_ptr<fl::Client>& client : in_process) {
      if (options.tokens.count(client->id()) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(absl::GetFlag(FLAGS_tokens),
                                                       ": no token for client ", client->id()));
      }
      remote.push_back(std::make_unique<fl::deploy::RemoteClient>(
          client->id(), client->num_examples(), &coordinator, deadline, device));
    }
    return remote;
  };
  fl::InstallStopHandlers();
  absl::StatusOr<fl::ExperimentResult> result =
      fl::RunExperiment(experiment, output_dir, checkpoint.has_value() ? &*checkpoint : nullptr,
                        nullptr, reach);
  const bool stopped = absl::IsCancelled(result.status());
  coordinator.EndSessions(result.ok() ? "the run is over"
                          : stopped   ? "the server stopped; it will resume"
                                      : absl::StrCat("the run failed: ", result.status().message()),
                          /*will_resume=*/stopped);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(10));
  for (const auto& [reason, count] : coordinator.refusals()) {
    LOG(WARNING) << "fl_server: refused " << count << " x " << reason;
  }
  const fl::deploy::Traffic traffic = coordinator.traffic();
  LOG(INFO) << "fl_server: sent " << traffic.bytes_sent << " bytes in " << traffic.messages_sent
            << " messages, received " << traffic.bytes_received << " bytes in "
            << traffic.messages_received << " messages";
  if (stopped) {
    std::fprintf(stderr, "fl_server: %s; continue with --resume --output_dir=%s\n",
                 std::string(result.status().message()).c_str(), output_dir.c_str());
    return 3;
  }
  if (!result.ok()) return Fail(1, result.status());
  std::printf("results in %s\n", output_dir.c_str());
  return 0;
}
