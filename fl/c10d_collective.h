#ifndef FL_C10D_COLLECTIVE_H_
#define FL_C10D_COLLECTIVE_H_

// fl::Collective over PyTorch's torch.distributed engine (c10d): a TCPStore for
// the rendezvous and a Gloo process group over TCP for the collectives, the same
// engine torchrun-launched PyTorch programs use on CPUs.
//
// Processes find each other as PyTorch's do: RANK, WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT (rank 0 listens there), or Open MPI's / Slurm's rank and size
// variables when RANK and WORLD_SIZE are unset. GLOO_SOCKET_IFNAME picks the
// network interface, as in PyTorch.
//
// Each process also counts a heartbeat in the store, so that when a collective
// fails the survivors can say which rank stopped answering and where it was; the
// first rank to fail leaves its report there, for the ranks that fail only once
// rank 0 has ended and taken the store along.

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "fl/collective.h"

namespace fl {

struct ProcessGroupAddress {
  int rank = 0;
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  // Where rank and world size came from ("RANK/WORLD_SIZE", "Open MPI", "Slurm").
  std::string source;
};

// From the environment; the error says which variables are missing or malformed.
absl::StatusOr<ProcessGroupAddress> ProcessGroupAddressFromEnvironment();

// Joins the group: waits up to `timeout` for every process, and every collective
// after that fails once a peer has not answered within `timeout`.
absl::StatusOr<std::unique_ptr<Collective>> ConnectC10d(const ProcessGroupAddress& address,
                                                        std::chrono::milliseconds timeout);

}  // namespace fl

#endif  // FL_C10D_COLLECTIVE_H_
