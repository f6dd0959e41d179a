#include "fl/deploy/client_session.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fl/deploy/deploy.grpc.pb.h"
#include "fl/wire.h"
#include "glog/logging.h"

namespace fl::deploy {
namespace {

using fedkit::deploy::ClientMessage;
using fedkit::deploy::ServerMessage;
using Stream = grpc::ClientReaderWriter<ClientMessage, ServerMessage>;

absl::StatusCode FromGrpc(grpc::StatusCode code) { return static_cast<absl::StatusCode>(code); }

bool SendAnswer(Stream& stream, uint64_t task, absl::StatusOr<ClientUpdate> update,
                int64_t chunk_bytes) {
  std::vector<IndexedUpdate> outcome;
  outcome.push_back({0, std::move(update)});
  const std::string payload = SerializeUpdates(outcome);
  ClientMessage header;
  header.mutable_result()->set_task_id(task);
  header.mutable_result()->set_payload_bytes(static_cast<int64_t>(payload.size()));
  if (!stream.Write(header)) return false;
  for (absl::string_view chunk : Chunks(payload, chunk_bytes)) {
    ClientMessage message;
    message.mutable_chunk()->set_data(chunk.data(), chunk.size());
    if (!stream.Write(message)) return false;
  }
  return true;
}

// The client's outcome of a complete task payload: a failure when the payload
// does not parse or its model is not the client's layout.
absl::StatusOr<ClientUpdate> TrainOn(absl::string_view payload, uint64_t task, int round,
                                     Client& client, const ModelState& layout,
                                     const c10::Device& device) {
  const std::string source = absl::StrCat("task ", task, " from the server");
  absl::StatusOr<Task> parsed = ParseTask(payload, device, source);
  if (!parsed.ok()) return parsed.status();
  if (parsed->round != round) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": its header says round ", round,
                                                   ", its payload ", parsed->round));
  }
  if (absl::Status layout_ok = layout.CheckSameLayout(parsed->model); !layout_ok.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the model is not this client's: ", layout_ok.message()));
  }
  return client.Train(parsed->model, parsed->plan, parsed->round);
}

}  // namespace

absl::StatusOr<std::string> RunClientSession(const std::shared_ptr<grpc::Channel>& channel,
                                             Client& client, const ModelState& layout,
                                             const ClientSessionOptions& options) {
  const std::string who = absl::StrCat("client ", options.client_id);
  std::unique_ptr<fedkit::deploy::Coordinator::Stub> stub =
      fedkit::deploy::Coordinator::NewStub(channel);
  grpc::ClientContext context;
  std::unique_ptr<Stream> stream = stub->Session(&context);
  auto fail = [&](absl::Status status) {
    context.TryCancel();
    stream->Finish();
    return status;
  };
  ClientMessage hello;
  hello.mutable_hello()->set_client_id(options.client_id);
  hello.mutable_hello()->set_token(options.token);
  hello.mutable_hello()->set_spec_digest(options.spec_digest);
  stream->Write(hello);

  ServerMessage message;
  std::optional<PayloadAssembler> assembler;
  uint64_t task = 0;
  int round = 0;
  bool awaiting_verdict = false;
  auto settle = [&](bool accepted) {
    if (awaiting_verdict) client.Acknowledge(accepted);
    awaiting_verdict = false;
  };
  while (stream->Read(&message)) {
    switch (message.kind_case()) {
      case ServerMessage::kWelcome:
        LOG(INFO) << who << ": connected; the server has run " << message.welcome().rounds_done()
                  << " rounds";
        continue;
      case ServerMessage::kVerdict:
        if (message.verdict().task_id() == task) settle(message.verdict().accepted());
        continue;
      case ServerMessage::kGoodbye: {
        settle(false);
        stream->WritesDone();
        // Finish waits for every message to be read: the server sends none after this.
        ServerMessage rest;
        while (stream->Read(&rest)) {
        }
        const grpc::Status status = stream->Finish();
        if (!status.ok()) {
          return absl::Status(FromGrpc(status.error_code()),
                              absl::StrCat(who, ": ", message.goodbye().reason()));
        }
        return message.goodbye().reason();
      }
      case ServerMessage::kTask: {
        settle(false);  // no verdict on the last task before the next: rejected
        if (assembler.has_value()) {
          return fail(absl::InvalidArgumentError(absl::StrCat(who, ": a task inside another")));
        }
        absl::StatusOr<PayloadAssembler> started = PayloadAssembler::Start(
            message.task().payload_bytes(), options.limits.max_payload_bytes,
            absl::StrCat(who, ": task ", message.task().task_id()));
        if (!started.ok()) return fail(started.status());
        assembler = *std::move(started);
        task = message.task().task_id();
        round = message.task().round();
        break;
      }
      case ServerMessage::kChunk:
        if (!assembler.has_value()) {
          return fail(absl::InvalidArgumentError(absl::StrCat(who, ": a chunk with no task")));
        }
        if (absl::Status added = assembler->Add(message.chunk().data()); !added.ok()) {
          return fail(added);
        }
        break;
      default:
        return fail(absl::InvalidArgumentError(absl::StrCat(who, ": an unknown message")));
    }
    if (assembler.has_value() && assembler->complete()) {
      const std::string payload = std::move(*assembler).Take();
      assembler.reset();
      absl::StatusOr<ClientUpdate> update =
          TrainOn(payload, task, round, client, layout, options.device);
      if (!update.ok()) LOG(WARNING) << who << ": task " << task << ": " << update.status();
      if (!SendAnswer(*stream, task, std::move(update), options.limits.chunk_bytes)) {
        context.TryCancel();  // unread messages would hold Finish up
        break;
      }
      awaiting_verdict = true;
    }
  }
  settle(false);
  const grpc::Status status = stream->Finish();
  return absl::UnavailableError(absl::StrCat(who, ": the session ended without a goodbye: ",
                                             status.error_message()));
}

}  // namespace fl::deploy
