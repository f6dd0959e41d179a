#ifndef FL_WIRE_H_
#define FL_WIRE_H_

// What the ranks of a distributed run send each other besides plain tensors:
// clients' round outcomes (an update or why training failed), and client-hook
// states for checkpoints, and the aggregator's state. Updates travel as a sequence of length-framed protobuf
// records, one per client, so no single record nears protobuf's 2 GB limit.

#include <map>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fl/aggregator.h"
#include "fl/client_state_store.h"
#include "fl/client_update.h"

namespace fl {

struct IndexedUpdate {
  int cohort_index = 0;
  absl::StatusOr<ClientUpdate> update;
};

std::string SerializeUpdates(const std::vector<IndexedUpdate>& updates);
// Tensors land on `device`. Errors name `source`.
absl::StatusOr<std::vector<IndexedUpdate>> ParseUpdates(absl::string_view bytes,
                                                        const c10::Device& device,
                                                        const std::string& source);

// A deployed client's task: what Client::Train takes.
struct Task {
  int round = 0;
  ModelState model;
  RoundPlan plan;
};
std::string SerializeTask(const ModelState& model, const RoundPlan& plan, int round);
// Tensors land on `device`. Errors name `source`; the model's layout is the
// caller's to check.
absl::StatusOr<Task> ParseTask(absl::string_view bytes, const c10::Device& device,
                               const std::string& source);

std::string SerializeTensors(const TensorMap& tensors);
absl::StatusOr<TensorMap> ParseTensors(absl::string_view bytes, const c10::Device& device,
                                       const std::string& source);

std::string SerializeClientStates(const std::map<ClientStateStore::Key, TensorMap>& states);
absl::StatusOr<std::map<ClientStateStore::Key, TensorMap>> ParseClientStates(
    absl::string_view bytes, const c10::Device& device, const std::string& source);

}  // namespace fl

#endif  // FL_WIRE_H_
