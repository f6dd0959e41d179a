#ifndef FL_CLIENT_H_
#define FL_CLIENT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "fl/aggregator.h"
#include "fl/client_update.h"
#include "fl/model_state.h"

namespace fl {

// A client's own model's result on its test examples.
struct OwnEvaluation {
  int64_t correct = 0;
  int64_t examples = 0;
};

// A participant the server can ask for an update. The in-process simulation's
// LocalClient trains on a worker's model replica; a remote client would forward
// the same request to a process that owns the data. The server cannot tell them apart.
class Client {
 public:
  virtual ~Client() = default;

  virtual int64_t id() const = 0;
  // Size of the client's training data (the weight in size-weighted averages).
  virtual int64_t num_examples() const = 0;
  // One round of local training starting from `global`. Thread-safe with respect
  // to other clients.
  virtual absl::StatusOr<ClientUpdate> Train(const ModelState& global, const RoundPlan& plan,
                                             int round) = 0;

  // The server's verdict on the update Train last returned (or on its failure):
  // accepted means averaged in. The client keeps the per-client state its hooks
  // produced in that round only if accepted. A client without such state has
  // nothing to do.
  virtual void Acknowledge(bool accepted) {}

  // For a client whose own model the server cannot assemble (a deployed client
  // keeps its personal tensors): evaluates `global` with the client's personal
  // tensors (fine-tuned first when the spec's client_evaluation asks) on
  // `test_indices` of the spec's test split (a client with data of its own: on
  // all of its test split), after round `round`. Default: Unimplemented.
  virtual absl::StatusOr<OwnEvaluation> EvaluateOwnModel(const ModelState& global,
                                                         const std::vector<int64_t>& test_indices,
                                                         int round) {
    return absl::UnimplementedError("this client cannot evaluate its own model");
  }
};

}  // namespace fl

#endif  // FL_CLIENT_H_
