#ifndef FL_CLIENT_SAMPLER_H_
#define FL_CLIENT_SAMPLER_H_

#include <cstdint>
#include <vector>

namespace fl {

// The round's cohort: `cohort_size` distinct client positions in [0, num_clients),
// uniform without replacement, sorted. The stream is fixed by (seed, round) alone.
// REQUIRES: 0 < cohort_size <= num_clients.
std::vector<int> SampleCohort(int num_clients, int cohort_size, uint64_t seed, int round);

}  // namespace fl

#endif  // FL_CLIENT_SAMPLER_H_
