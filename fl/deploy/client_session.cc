#include "fl/deploy/client_session.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fl/deploy/deploy.grpc.pb.h"
#include "fl/deploy/evaluation_task.h"
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

// A complete task payload, checked against its header's round and the client's
// layout. Errors name `source`.
absl::StatusOr<Task> ParseTaskFor(absl::string_view payload, int round, const ModelState& layout,
                                  const c10::Device& device, const std::string& source) {
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
  return parsed;
}

// The client's outcome of a complete task payload: its update, or why it has
// none (the payload does not parse, its model is not the client's layout,
// training failed); for an evaluation task its own model's count.
absl::StatusOr<ClientUpdate> AnswerTo(const fedkit::deploy::Task& header, absl::string_view payload,
                                      Client& client, const ModelState& layout,
                                      const c10::Device& device) {
  const std::string source = absl::StrCat(header.evaluation() ? "evaluation task " : "task ",
                                          header.task_id(), " from the server");
  absl::StatusOr<Task> task = ParseTaskFor(payload, header.round(), layout, device, source);
  if (!task.ok()) return task.status();
  if (!header.evaluation()) return client.Train(task->model, task->plan, task->round);
  absl::StatusOr<std::vector<int64_t>> indices = EvaluationIndices(task->plan.broadcast, source);
  if (!indices.ok()) return indices.status();
  absl::StatusOr<OwnEvaluation> result = client.EvaluateOwnModel(task->model, *indices, task->round);
  if (!result.ok()) return result.status();
  return EvaluationAnswer(client.id(), *result);
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
  hello.mutable_hello()->set_max_message_bytes(options.limits.max_message_bytes);
  stream->Write(hello);

  ServerMessage message;
  std::optional<PayloadAssembler> assembler;
  fedkit::deploy::Task task;
  int64_t chunk_bytes = ChunkBytesFor(options.limits, 0);  // until the welcome says
  SessionCarry own_carry;
  SessionCarry& carry = options.carry != nullptr ? *options.carry : own_carry;
  auto settle = [&](bool accepted) {
    if (carry.awaited_task == 0) return absl::OkStatus();
    const int round = carry.awaited_round;
    carry.awaited_task = 0;
    client.Acknowledge(accepted);
    return accepted && options.history != nullptr ? options.history->Record(round)
                                                  : absl::OkStatus();
  };
  while (stream->Read(&message)) {
    switch (message.kind_case()) {
      case ServerMessage::kWelcome:
        ++carry.welcomed;
        chunk_bytes = ChunkBytesFor(options.limits, message.welcome().max_message_bytes());
        LOG(INFO) << who << ": connected; the server has run " << message.welcome().rounds_done()
                  << " rounds";
        continue;
      case ServerMessage::kVerdict:
        if (message.verdict().task_id() == carry.awaited_task) {
          if (absl::Status kept = settle(message.verdict().accepted()); !kept.ok()) {
            return fail(kept);
          }
        }
        continue;
      case ServerMessage::kGoodbye: {
        const bool will_resume = message.goodbye().will_resume();
        if (!will_resume) settle(false).IgnoreError();  // a rejection records nothing
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
        if (will_resume) {
          return absl::UnavailableError(absl::StrCat(who, ": ", message.goodbye().reason()));
        }
        return message.goodbye().reason();
      }
      case ServerMessage::kTask: {
        // The verdict on the last answer, repeated; none for it: rejected.
        if (absl::Status kept = settle(message.task().verdict_task_id() == carry.awaited_task &&
                                       message.task().verdict_accepted());
            !kept.ok()) {
          return fail(kept);
        }
        if (assembler.has_value()) {
          return fail(absl::InvalidArgumentError(absl::StrCat(who, ": a task inside another")));
        }
        absl::StatusOr<PayloadAssembler> started = PayloadAssembler::Start(
            message.task().payload_bytes(), options.limits.max_payload_bytes,
            absl::StrCat(who, ": task ", message.task().task_id()));
        if (!started.ok()) return fail(started.status());
        assembler = *std::move(started);
        task = message.task();
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
      if (options.history != nullptr) {
        absl::StatusOr<int> rewound = options.history->Rewind(task.state_after_round());
        if (!rewound.ok()) return fail(rewound.status());
        if (absl::Status forgot = options.history->Forget(task.checkpointed_round()); !forgot.ok()) {
          return fail(forgot);
        }
      }
      absl::StatusOr<ClientUpdate> update = AnswerTo(task, payload, client, layout, options.device);
      if (!update.ok()) LOG(WARNING) << who << ": task " << task.task_id() << ": " << update.status();
      if (!SendAnswer(*stream, task.task_id(), std::move(update), chunk_bytes)) {
        context.TryCancel();  // unread messages would hold Finish up
        break;
      }
      // An evaluation changes no state: no verdict follows it.
      if (!task.evaluation()) {
        carry.awaited_task = task.task_id();
        carry.awaited_round = task.round();
      }
    }
  }
  if (options.carry == nullptr) settle(false).IgnoreError();
  const grpc::Status status = stream->Finish();
  return absl::UnavailableError(absl::StrCat(who, ": the session ended without a goodbye: ",
                                             status.error_message()));
}

}  // namespace fl::deploy
