// A client of a deployed run (bazel run //tools:fl_server): trains one client of
// the spec in this process, with its share of the spec's data or, with
// --data_dir, on its own files in the spec's dataset's format, and answers the
// server's tasks over TLS until the run is over. Reconnects when the connection
// drops, for up to --reconnect_seconds after it last reached the server. Its hook state (SCAFFOLD's c_i, ...) is
// kept in --state_dir after every accepted update, so that a restarted client
// continues where it was and, when the server resumes from a checkpoint, goes
// back to its state at that checkpoint.
//
//   bazel run //tools:fl_client -- --spec=SPEC --server=HOST:50051 --client_id=3
//       --token_file=token3.txt --tls_ca=ca.pem [--tls_cert=client.pem --tls_key=client.key]
//       [--state_dir=DIR] [--data_dir=DIR]
//
// Exit codes: 0 the run is over, 1 the session failed, 2 the command line, spec
// or files are wrong, or the server refused this client.

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "fl/deploy/client_session.h"
#include "fl/deploy/client_state_history.h"
#include "fl/deploy/deployed_run.h"
#include "fl/deploy/run_identity.h"
#include "fl/deploy/tls.h"
#include "fl/experiment.h"
#include "fl/federation.h"
#include "fl/index_files.h"
#include "glog/logging.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"

ABSL_FLAG(std::string, spec, "", "Path of the ExperimentSpec text proto (the server's).");
ABSL_FLAG(std::string, set, "", "Text-format fragment merged into the spec.");
ABSL_FLAG(std::string, server, "127.0.0.1:50051", "The server's address.");
ABSL_FLAG(int64_t, client_id, -1, "Which of the spec's clients this process is.");
ABSL_FLAG(std::string, token_file, "", "File whose first line is this client's token.");
ABSL_FLAG(std::string, tls_ca, "", "The CA that signed the server's certificate (PEM).");
ABSL_FLAG(std::string, tls_cert, "", "This client's certificate (PEM), for mutual TLS.");
ABSL_FLAG(std::string, tls_key, "", "This client's private key (PEM), for mutual TLS.");
ABSL_FLAG(std::string, data_dir, "",
          "This client's own data: a folder of files in the spec's dataset's format (read "
          "with the spec's dataset options but this folder), all of whose training split "
          "this client trains on, instead of its share of the spec's data.");
ABSL_FLAG(std::string, state_dir, "",
          "Where this client keeps its hook state (default: "
          "fl_client_state/<spec name>/client_<id>).");
ABSL_FLAG(int64_t, max_payload_mb, 1024, "The largest task this client accepts, in MiB.");
ABSL_FLAG(int64_t, max_message_kb, 4096,
          "The largest gRPC message this client accepts, in KiB (>= 64); the server sends "
          "chunks that fit.");
ABSL_FLAG(double, reconnect_seconds, 120,
          "How long to keep reconnecting when the server cannot be reached.");

namespace {

int Fail(int code, const absl::Status& status) {
  std::fprintf(stderr, "fl_client: %s\n", std::string(status.message()).c_str());
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
  absl::StatusOr<std::string> token = fl::deploy::ReadToken(absl::GetFlag(FLAGS_token_file));
  if (!token.ok()) return Fail(2, token.status());
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = fl::deploy::ClientTls(
      {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca)});
  if (!credentials.ok()) return Fail(2, credentials.status());
  absl::StatusOr<fl::deploy::PayloadLimits> limits = fl::deploy::PayloadLimitsFromFlags(
      absl::GetFlag(FLAGS_max_payload_mb), absl::GetFlag(FLAGS_max_message_kb));
  if (!limits.ok()) return Fail(2, limits.status());
  std::unique_ptr<fl::Dataset> own_data;
  if (const std::string dir = absl::GetFlag(FLAGS_data_dir); !dir.empty()) {
    absl::StatusOr<std::unique_ptr<fl::Dataset>> dataset =
        fl::deploy::OwnDataset(spec, fl::ResolveUserPath(dir));
    if (!dataset.ok()) {
      return Fail(2, absl::Status(dataset.status().code(), absl::StrCat("--data_dir: ",
                                                                     dataset.status().message())));
    }
    own_data = *std::move(dataset);
  }
  absl::StatusOr<fl::HostedClient> hosted =
      fl::HostClient(experiment, absl::GetFlag(FLAGS_client_id), own_data.get());
  if (!hosted.ok()) return Fail(2, hosted.status());
  LOG(INFO) << "fl_client " << absl::GetFlag(FLAGS_client_id) << ": "
            << hosted->federation->client_sizes()[absl::GetFlag(FLAGS_client_id)]
            << " training examples" << (own_data != nullptr ? " of its own" : "");

  fl::deploy::ClientSessionOptions options;
  options.client_id = absl::GetFlag(FLAGS_client_id);
  options.token = *std::move(token);
  options.spec_digest = fl::deploy::SpecDigest(spec);
  options.device = experiment.device;
  options.limits = *limits;
  grpc::ChannelArguments channel_args;
  channel_args.SetMaxReceiveMessageSize(static_cast<int>(options.limits.max_message_bytes));
  std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  if (state_dir.empty()) {
    state_dir = absl::StrCat("fl_client_state/", spec.name(), "/client_", options.client_id);
  }
  absl::StatusOr<std::unique_ptr<fl::deploy::ClientStateHistory>> history =
      fl::deploy::ClientStateHistory::Open(fl::ResolveUserPath(state_dir), options.client_id,
                                           options.spec_digest, experiment.device,
                                           &hosted->federation->state_store());
  if (!history.ok()) return Fail(2, history.status());
  options.history = history->get();
  fl::deploy::SessionCarry carry;
  options.carry = &carry;
  const auto patience =
      std::chrono::milliseconds(static_cast<int64_t>(1000 * absl::GetFlag(FLAGS_reconnect_seconds)));
  auto give_up = std::chrono::steady_clock::now() + patience;
  for (int welcomed = 0;; welcomed = carry.welcomed) {
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel(absl::GetFlag(FLAGS_server), *credentials, channel_args);
    absl::StatusOr<std::string> ended =
        fl::deploy::RunClientSession(channel, *hosted->client, hosted->layout, options);
    if (ended.ok()) {
      LOG(INFO) << "fl_client " << options.client_id << ": " << *ended;
      return 0;
    }
    if (ended.status().code() == absl::StatusCode::kUnauthenticated) return Fail(2, ended.status());
    // Patience counts from the last time the server was reached.
    if (carry.welcomed > welcomed) give_up = std::chrono::steady_clock::now() + patience;
    if (ended.status().code() != absl::StatusCode::kUnavailable ||
        std::chrono::steady_clock::now() > give_up) {
      return Fail(1, ended.status());
    }
    LOG(WARNING) << ended.status() << "; reconnecting";
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}
