#include "fl/deploy/coordinator.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include <openssl/crypto.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace fl::deploy {

using fedkit::deploy::ClientMessage;
using fedkit::deploy::ServerMessage;

// One connected client. The stream is the handler's: writes go through
// write_mutex and stop when the handler ends (writable false). The task fields
// are guarded by the Coordinator's mutex_.
struct Coordinator::Connection {
  Counters* counters = nullptr;
  int64_t client_id = -1;
  // The size of the chunks the client accepts.
  int64_t chunk_bytes = 0;
  grpc::ServerContext* context = nullptr;
  grpc::ServerReaderWriter<ServerMessage, ClientMessage>* stream = nullptr;
  absl::Mutex write_mutex;
  bool writable ABSL_GUARDED_BY(write_mutex) = true;

  // Set once the Welcome is written: tasks wait for it, so that the client knows
  // our message limit before it answers (a task written first would be answered
  // in chunks the size of gRPC's default limit, and refused by ours).
  bool welcomed = false;
  bool ended = false;
  std::string end_reason;
  uint64_t pending_task = 0;  // 0: none
  absl::Time deadline = absl::InfiniteFuture();
  std::optional<std::string> answer;
  std::set<uint64_t> issued;

  bool Write(const ServerMessage& message) {
    absl::MutexLock lock(&write_mutex);
    if (!writable || !stream->Write(message)) return false;
    counters->bytes_sent += static_cast<int64_t>(message.ByteSizeLong());
    ++counters->messages_sent;
    return true;
  }
  bool Read(ClientMessage& message) {
    if (!stream->Read(&message)) return false;
    counters->bytes_received += static_cast<int64_t>(message.ByteSizeLong());
    ++counters->messages_received;
    return true;
  }
  void Goodbye(const std::string& reason, bool will_resume = false) {
    ServerMessage message;
    message.mutable_goodbye()->set_reason(reason);
    message.mutable_goodbye()->set_will_resume(will_resume);
    Write(message);
  }
};

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(std::move(options)), watchdog_([this] { CancelOverdue(); }) {}

Coordinator::~Coordinator() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  watchdog_.join();
}

void Coordinator::CancelOverdue() {
  absl::MutexLock lock(&mutex_);
  while (!stopping_) {
    mutex_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(50));
    const absl::Time now = absl::Now();
    for (auto& [id, connection] : connections_) {
      // A client that stops reading would block the task's writes; cancelling
      // its session fails them.
      if (connection->pending_task != 0 && connection->deadline < now && !connection->ended) {
        connection->end_reason = "no answer by the task's deadline";
        connection->context->TryCancel();
      }
    }
  }
}

void Coordinator::Refuse(int64_t client_id, const std::string& reason, const std::string& detail) {
  LOG(WARNING) << "deploy: refused client " << client_id << " (" << reason << "): " << detail;
  absl::MutexLock lock(&mutex_);
  ++refusals_[reason];
}

std::map<std::string, int> Coordinator::refusals() const {
  absl::MutexLock lock(&mutex_);
  return refusals_;
}

Traffic Coordinator::traffic() const {
  return {counters_.bytes_sent, counters_.bytes_received, counters_.messages_sent,
          counters_.messages_received};
}

grpc::Status Coordinator::Session(
    grpc::ServerContext* context, grpc::ServerReaderWriter<ServerMessage, ClientMessage>* stream) {
  auto connection = std::make_shared<Connection>();
  connection->counters = &counters_;
  connection->context = context;
  connection->stream = stream;
  ClientMessage first;
  if (!connection->Read(first)) return grpc::Status(grpc::StatusCode::CANCELLED, "no hello");
  const fedkit::deploy::Hello& hello = first.hello();
  const int64_t id = hello.client_id();
  std::string reason, detail;
  auto token = options_.tokens.find(id);
  if (!first.has_hello()) {
    reason = "protocol";
    detail = "the first message is not a hello";
  } else if (token == options_.tokens.end()) {
    reason = "unknown_client";
    detail = absl::StrCat("client id ", id, " is not in this run");
  } else if (token->second.size() != hello.token().size() ||
             CRYPTO_memcmp(token->second.data(), hello.token().data(), token->second.size()) != 0) {
    reason = "token";
    detail = "wrong token";
  } else if (hello.spec_digest() != options_.spec_digest) {
    reason = "spec";
    detail = absl::StrCat("spec digest ", hello.spec_digest(), ", this run's is ",
                          options_.spec_digest);
  }
  if (!reason.empty()) {
    Refuse(id, reason, absl::StrCat(detail, " (from ", context->peer(), ")"));
    connection->Goodbye(absl::StrCat("refused: ", detail));
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, detail);
  }
  connection->client_id = id;
  connection->chunk_bytes = ChunkBytesFor(options_.limits, hello.max_message_bytes());
  ServerMessage welcome;
  {
    absl::MutexLock lock(&mutex_);
    std::shared_ptr<Connection>& slot = connections_[id];
    if (slot != nullptr) {  // a reconnection: the old session ends
      slot->ended = true;
      slot->end_reason = "replaced by a new connection";
      slot->context->TryCancel();
    }
    slot = connection;
    welcome.mutable_welcome()->set_rounds_done(
        std::max(options_.resumed_after_round, latest_round_ - 1));
  }
  welcome.mutable_welcome()->set_max_message_bytes(options_.limits.max_message_bytes);
  connection->Write(welcome);
  {
    absl::MutexLock lock(&mutex_);
    connection->welcomed = true;
  }
  LOG(INFO) << "deploy: client " << id << " connected from " << context->peer();

  const absl::Status served = Serve(*connection);
  {
    absl::MutexLock lock(&connection->write_mutex);
    connection->writable = false;
  }
  absl::MutexLock lock(&mutex_);
  connection->ended = true;
  if (!served.ok()) connection->end_reason = std::string(served.message());
  if (connection->end_reason.empty()) connection->end_reason = "the client disconnected";
  auto it = connections_.find(id);
  if (it != connections_.end() && it->second == connection) connections_.erase(it);
  return served.ok() ? grpc::Status::OK
                     : grpc::Status(grpc::StatusCode::ABORTED, std::string(served.message()));
}

absl::Status Coordinator::Serve(Connection& connection) {
  const int64_t id = connection.client_id;
  auto refuse = [&](const std::string& reason, const std::string& detail) {
    Refuse(id, reason, detail);
    connection.Goodbye(absl::StrCat("refused: ", detail));
    return absl::InvalidArgumentError(absl::StrCat(reason, ": ", detail));
  };
  ClientMessage message;
  std::optional<PayloadAssembler> assembler;
  uint64_t answering = 0;
  while (connection.Read(message)) {
    switch (message.kind_case()) {
      case ClientMessage::kResult: {
        const uint64_t task = message.result().task_id();
        bool pending, issued;
        {
          absl::MutexLock lock(&mutex_);
          pending = task != 0 && task == connection.pending_task;
          issued = connection.issued.count(task) > 0;
        }
        if (assembler.has_value()) return refuse("protocol", "an answer inside another");
        if (!pending) {
          return refuse(issued ? "replay" : "protocol",
                        absl::StrCat("an answer to task ", task, ", which it ",
                                     issued ? "has answered or was too late for" : "was not given"));
        }
        absl::StatusOr<PayloadAssembler> started = PayloadAssembler::Start(
            message.result().payload_bytes(), options_.limits.max_payload_bytes,
            absl::StrCat("client ", id, "'s answer to task ", task));
        if (!started.ok()) {
          return refuse(started.status().code() == absl::StatusCode::kResourceExhausted ? "oversize"
                                                                                       : "protocol",
                        std::string(started.status().message()));
        }
        assembler = *std::move(started);
        answering = task;
        break;
      }
      case ClientMessage::kChunk:
        if (!assembler.has_value()) return refuse("protocol", "a chunk with no answer before it");
        if (absl::Status added = assembler->Add(message.chunk().data()); !added.ok()) {
          return refuse("protocol", std::string(added.message()));
        }
        break;
      default:
        return refuse("protocol", "a message other than an answer or its chunks");
    }
    if (assembler.has_value() && assembler->complete()) {
      absl::MutexLock lock(&mutex_);
      if (connection.pending_task == answering) {
        connection.answer = std::move(*assembler).Take();
        connection.pending_task = 0;
        last_answered_[id] = answering;
      }
      assembler.reset();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Coordinator::RunTask(int64_t client_id, int round,
                                                 absl::string_view payload,
                                                 absl::Duration deadline, bool evaluation) {
  std::shared_ptr<Connection> connection;
  uint64_t task;
  ServerMessage header;
  {
    absl::MutexLock lock(&mutex_);
    auto connected = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
      auto it = connections_.find(client_id);
      return stopping_ ||
             (it != connections_.end() && it->second->welcomed && !it->second->ended);
    };
    if (!mutex_.AwaitWithTimeout(absl::Condition(&connected), options_.connect_timeout) ||
        stopping_) {
      return absl::UnavailableError(
          absl::StrCat("client ", client_id, " is not connected (waited ",
                       absl::FormatDuration(options_.connect_timeout), ")"));
    }
    connection = connections_.at(client_id);
    task = ++next_task_id_;
    latest_round_ = std::max(latest_round_, round);
    connection->pending_task = task;
    connection->answer.reset();
    connection->issued.insert(task);
    connection->deadline = absl::Now() + deadline;
    if (auto verdict = verdicts_.find(client_id); verdict != verdicts_.end()) {
      header.mutable_task()->set_verdict_task_id(verdict->second.first);
      header.mutable_task()->set_verdict_accepted(verdict->second.second);
    }
  }
  header.mutable_task()->set_task_id(task);
  header.mutable_task()->set_round(round);
  header.mutable_task()->set_payload_bytes(static_cast<int64_t>(payload.size()));
  header.mutable_task()->set_evaluation(evaluation);
  if (options_.asynchronous) {
    header.mutable_task()->set_state_after_round(std::numeric_limits<int32_t>::max());
    header.mutable_task()->set_checkpointed_round(std::numeric_limits<int32_t>::max());
  } else {
    const int every = options_.checkpoint_every;
    // An evaluation after round r uses the state after r; the newest checkpoint
    // it may count on is the one a task of round r would (r's own may not be
    // written yet).
    header.mutable_task()->set_state_after_round(evaluation ? round : round - 1);
    header.mutable_task()->set_checkpointed_round(
        std::max(options_.resumed_after_round, every > 0 ? (round - 1) / every * every : 0));
  }
  bool sent = connection->Write(header);
  for (absl::string_view chunk : Chunks(payload, connection->chunk_bytes)) {
    if (!sent) break;
    ServerMessage message;
    message.mutable_chunk()->set_data(chunk.data(), chunk.size());
    sent = connection->Write(message);
  }
  absl::MutexLock lock(&mutex_);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return connection->answer.has_value() || connection->ended;
  };
  mutex_.AwaitWithDeadline(absl::Condition(&done), connection->deadline);
  if (connection->answer.has_value()) {
    std::string answer = *std::move(connection->answer);
    connection->answer.reset();
    connection->deadline = absl::InfiniteFuture();
    return answer;
  }
  connection->pending_task = 0;
  if (absl::Now() >= connection->deadline) {
    ++refusals_["deadline"];
    if (!connection->ended) connection->context->TryCancel();
    return absl::DeadlineExceededError(absl::StrCat(
        "client ", client_id, " did not answer task ", task, " (round ", round, ") within ",
        absl::FormatDuration(deadline)));
  }
  return absl::UnavailableError(
      absl::StrCat("client ", client_id, "'s session ended during task ", task, " (round ", round,
                   "): ", connection->end_reason));
}

void Coordinator::SendVerdict(int64_t client_id, bool accepted) {
  std::shared_ptr<Connection> connection;
  ServerMessage message;
  {
    absl::MutexLock lock(&mutex_);
    auto answered = last_answered_.find(client_id);
    if (answered == last_answered_.end()) return;
    verdicts_[client_id] = {answered->second, accepted};
    auto it = connections_.find(client_id);
    if (it == connections_.end()) return;
    connection = it->second;
    message.mutable_verdict()->set_task_id(answered->second);
    message.mutable_verdict()->set_accepted(accepted);
  }
  connection->Write(message);
}

void Coordinator::EndSessions(const std::string& reason, bool will_resume) {
  std::vector<std::shared_ptr<Connection>> connections;
  {
    absl::MutexLock lock(&mutex_);
    for (auto& [id, connection] : connections_) connections.push_back(connection);
  }
  for (auto& connection : connections) connection->Goodbye(reason, will_resume);
}

}  // namespace fl::deploy
