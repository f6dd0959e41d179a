#ifndef FL_DEPLOY_COORDINATOR_H_
#define FL_DEPLOY_COORDINATOR_H_

// The server's side of a deployment: the gRPC service every client process dials
// (one long-lived session each), and the calls RemoteClient makes on it to send a
// client its task and wait for the answer.
//
// A session starts with the client's Hello: its id, its token and the spec's
// digest, each checked before anything else is read. Then the server sends tasks
// (a header, then the payload in chunks) and verdicts; the client answers each
// task once, with the task's id. Anything else ends the session and is counted: an
// answer to a task it was not given (a replay), a payload over the limit or
// running past its declared size, a chunk with no header. A task not answered by
// its deadline ends the session too, so a hung client holds up no round; a client
// may reconnect and take the next task.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fl/deploy/deploy.grpc.pb.h"
#include "fl/deploy/payload.h"

namespace fl::deploy {

struct CoordinatorOptions {
  // Each client id's token; a client whose id is not here is refused.
  std::map<int64_t, std::string> tokens;
  // The digest of the run's spec: a client started from another spec is refused.
  std::string spec_digest;
  PayloadLimits limits;
  // How long a task waits for its client to connect (or reconnect).
  absl::Duration connect_timeout = absl::Seconds(60);
  // What each task tells its client about the hook state to train from (see
  // Task in deploy.proto): in synchronous rounds the state after the round
  // before, and the round of the server's newest checkpoint (the run resumed
  // after `resumed_after_round`, and writes one after every `checkpoint_every`-th
  // round); in asynchronous runs the newest state.
  bool asynchronous = false;
  int checkpoint_every = 0;
  int resumed_after_round = 0;
};

// The protocol's bytes (serialized messages, without gRPC's, HTTP/2's and TLS's
// framing) and messages, both ways, since the coordinator started.
struct Traffic {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t messages_sent = 0;
  int64_t messages_received = 0;
};

class Coordinator final : public fedkit::deploy::Coordinator::Service {
 public:
  explicit Coordinator(CoordinatorOptions options);
  ~Coordinator() override;

  grpc::Status Session(grpc::ServerContext* context,
                       grpc::ServerReaderWriter<fedkit::deploy::ServerMessage,
                                                fedkit::deploy::ClientMessage>* stream) override;

  // Sends client `client_id` the task and returns its answer's payload.
  // kUnavailable: the client did not connect within connect_timeout, or its
  // session ended (disconnected, or it broke the protocol); kDeadlineExceeded: no
  // answer within `deadline` of sending (its session is ended).
  // `evaluation`: an evaluation task after `round` (Task.evaluation), which
  // leaves the client's last verdict where it was.
  absl::StatusOr<std::string> RunTask(int64_t client_id, int round, absl::string_view payload,
                                      absl::Duration deadline, bool evaluation = false);
  // The verdict on the client's last answered task. Also repeated with the
  // client's next task, in case this one is lost with its connection.
  void SendVerdict(int64_t client_id, bool accepted);
  // Says goodbye to every connected client; their sessions then end. With
  // `will_resume`, the clients keep reconnecting (the server will resume).
  void EndSessions(const std::string& reason, bool will_resume = false);

  // What was refused so far, by reason: "unknown_client", "token", "spec",
  // "protocol", "replay", "oversize", "deadline".
  std::map<std::string, int> refusals() const;
  Traffic traffic() const;

 private:
  struct Connection;

  void Refuse(int64_t client_id, const std::string& reason, const std::string& detail);
  // Reads the session's messages until it ends; errors end it.
  absl::Status Serve(Connection& connection);
  void CancelOverdue();

  const CoordinatorOptions options_;
  mutable absl::Mutex mutex_;
  std::map<int64_t, std::shared_ptr<Connection>> connections_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_task_id_ ABSL_GUARDED_BY(mutex_) = 0;
  // The latest round a task was sent for (the Welcome's rounds done).
  int latest_round_ ABSL_GUARDED_BY(mutex_) = 0;
  // By client id: its last answered task, and the last verdict given.
  std::map<int64_t, uint64_t> last_answered_ ABSL_GUARDED_BY(mutex_);
  std::map<int64_t, std::pair<uint64_t, bool>> verdicts_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, int> refusals_ ABSL_GUARDED_BY(mutex_);
  // Counted by the connections as they write and read.
  struct Counters {
    std::atomic<int64_t> bytes_sent{0}, bytes_received{0}, messages_sent{0},
        messages_received{0};
  };
  Counters counters_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  // Ends the sessions of tasks past their deadline.
  std::thread watchdog_;
};

}  // namespace fl::deploy

#endif  // FL_DEPLOY_COORDINATOR_H_
