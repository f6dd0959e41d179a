#ifndef FL_DEPLOY_REMOTE_CLIENT_H_
#define FL_DEPLOY_REMOTE_CLIENT_H_

// The server's stand-in for a client that runs in another process: an fl::Client
// whose Train sends the task over the client's session (fl/deploy/coordinator.h)
// and returns the update it answers, checked as a distributed run checks one, so
// no aggregator, hook or server loop can tell it from an in-process client. A
// client that is not connected, disconnects, breaks the protocol or misses the
// deadline fails its training for the round (the server counts it as rejected,
// "training") and the round goes on.

#include <cstdint>

#include <c10/core/Device.h>

#include "absl/time/time.h"
#include "fl/client.h"
#include "fl/deploy/coordinator.h"

namespace fl::deploy {

class RemoteClient : public Client {
 public:
  // `coordinator` must outlive the client. `deadline`: for each task, from sending
  // it to the end of the answer.
  RemoteClient(int64_t id, int64_t num_examples, Coordinator* coordinator,
               absl::Duration deadline, c10::Device device);

  int64_t id() const override { return id_; }
  int64_t num_examples() const override { return num_examples_; }
  absl::StatusOr<ClientUpdate> Train(const ModelState& global, const RoundPlan& plan,
                                     int round) override;
  void Acknowledge(bool accepted) override;
  // Sends an evaluation task (Task.evaluation) and returns the client's count.
  absl::StatusOr<OwnEvaluation> EvaluateOwnModel(const ModelState& global,
                                                 const std::vector<int64_t>& test_indices,
                                                 int round) override;

 private:
  const int64_t id_;
  const int64_t num_examples_;
  Coordinator* const coordinator_;
  const absl::Duration deadline_;
  const c10::Device device_;
};

}  // namespace fl::deploy

#endif  // FL_DEPLOY_REMOTE_CLIENT_H_
