#ifndef FL_RANK_ASSIGNMENT_H_
#define FL_RANK_ASSIGNMENT_H_

// Which process of a distributed run owns each client for the whole run: it
// trains the client whenever the client is sampled and keeps the client's hook
// state. Clients go to ranks by expected cost, largest first, each to the rank
// with the least cost so far (longest-processing-time-first), so a round's
// training is balanced in expectation over the cohort draws.

#include <cstdint>
#include <vector>

namespace fl {

// costs[k]: client k's expected training cost (its number of examples). Returns
// each client's rank in [0, world_size). Ties go to the lower index and rank, so
// every process computes the same assignment.
std::vector<int> AssignClientsToRanks(const std::vector<int64_t>& costs, int world_size);

}  // namespace fl

#endif  // FL_RANK_ASSIGNMENT_H_
