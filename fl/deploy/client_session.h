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
#include "fl/deploy/payload.h"
#include "grpcpp/channel.h"

namespace fl::deploy {

struct ClientSessionOptions {
  int64_t client_id = -1;
  std::string token;
  std::string spec_digest;
  PayloadLimits limits;
  c10::Device device = c10::kCPU;
};

// Returns the goodbye's reason. Errors: refused at hello (kUnauthenticated, the
// server's reason), the connection lost (kUnavailable), or a task the server sent
// against the protocol or over the limit.
absl::StatusOr<std::string> RunClientSession(const std::shared_ptr<grpc::Channel>& channel,
                                             Client& client, const ModelState& layout,
                                             const ClientSessionOptions& options);

}  // namespace fl::deploy

#endif  // FL_DEPLOY_CLIENT_SESSION_H_
