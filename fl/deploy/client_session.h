#ifndef FL_DEPLOY_CLIENT_SESSION_H_
#define FL_DEPLOY_CLIENT_SESSION_H_

// A client process's side of a deployment: one session with the server
// (fl/deploy/coordinator.h). It says hello, then for each task checks the model
// against the client's own layout before training, trains with the in-process
// fl::Client (its data, hooks and their state stay here), answers, and passes the
// server's verdicts on, until the server says goodbye.

#include <cstdint>
#include <memory>
#include <string>

#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "fl/client.h"
#include "fl/deploy/client_state_history.h"
#include "fl/deploy/payload.h"
#include "grpcpp/channel.h"

namespace fl::deploy {

// What a client process carries from one session to the next.
struct SessionCarry {
  // The answer awaiting the server's verdict (task 0: none), so that a verdict
  // that comes after a reconnection (the server repeats it with the next task)
  // still reaches the client's hooks.
  uint64_t awaited_task = 0;
  int awaited_round = 0;
  // Sessions the server has welcomed so far.
  int welcomed = 0;
};

struct ClientSessionOptions {
  int64_t client_id = -1;
  std::string token;
  std::string spec_digest;
  PayloadLimits limits;
  c10::Device device = c10::kCPU;
  // When set, the client's hook state follows each task's state_after_round
  // (going back after a server resumed from a checkpoint) and is recorded after
  // each accepted update (fl/deploy/client_state_history.h).
  ClientStateHistory* history = nullptr;
  // Carried from session to session by a client that reconnects. Null: an
  // answer still awaiting its verdict when the session ends counts as rejected.
  SessionCarry* carry = nullptr;
};

// Returns the goodbye's reason. Errors: refused at hello (kUnauthenticated, the
// server's reason), the connection lost or the server stopping to resume
// (kUnavailable: reconnect), a task the server sent
// against the protocol or over the limit, or the hook state history's errors.
absl::StatusOr<std::string> RunClientSession(const std::shared_ptr<grpc::Channel>& channel,
                                             Client& client, const ModelState& layout,
                                             const ClientSessionOptions& options);

}  // namespace fl::deploy

#endif  // FL_DEPLOY_CLIENT_SESSION_H_
