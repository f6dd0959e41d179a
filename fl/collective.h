#ifndef FL_COLLECTIVE_H_
#define FL_COLLECTIVE_H_

// What the server loop needs from the processes of a distributed run
// (simulation.backend C10D): collectives over a fixed group of world_size()
// processes, rank 0 being the one that aggregates, evaluates and writes. Every
// process calls the same collectives in the same order. A failure (a process that
// died, stalled past the timeout, or disagrees on shapes) comes back as a status
// naming the ranks that did not arrive and where they were last seen, never as a
// hang. The server holds a Collective only through this interface, so the core
// does not depend on the engine (fl/c10d_collective.h is the one there is).

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fl {

class Collective {
 public:
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Says where this process is ("round 3: training"), for the error the others
  // report should it die or stall there.
  virtual void SetStage(const std::string& stage) = 0;

  // Element-wise sums over all processes, in place, on every process. Shapes and
  // dtypes must agree across processes.
  virtual absl::Status AllReduceSum(std::vector<at::Tensor>& tensors) = 0;
  // Rank 0's tensors, copied in place into every process's (same shapes).
  virtual absl::Status Broadcast(std::vector<at::Tensor>& tensors) = 0;
  // Every process's message, on rank 0 in rank order (its own included); an empty
  // vector on the others.
  virtual absl::StatusOr<std::vector<std::string>> Gather(std::string message) = 0;
  // Rank 0's message, on every process (the others' argument is ignored).
  virtual absl::StatusOr<std::string> BroadcastMessage(std::string message) = 0;

  // Payload bytes this process has handed to collectives so far: its tensors'
  // bytes per all-reduce, rank 0's per broadcast (once, whatever the world size),
  // each message sent to rank 0. What goes over the wire depends on the engine's
  // algorithms; this is what the run asks it to move.
  virtual int64_t payload_bytes() const = 0;
};

}  // namespace fl

#endif  // FL_COLLECTIVE_H_
