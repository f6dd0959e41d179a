#ifndef FL_CLIENT_SAMPLER_H_
#define FL_CLIENT_SAMPLER_H_

#include <cstdint>
#include <vector>

namespace fl {

// The round's cohort: `cohort_size` distinct client positions in [0, num_clients),
// uniform without replacement, sorted. The stream is fixed by (seed, round) alone.
// REQUIRES: 0 < cohort_size <= num_clients.
std::vector<int> SampleCohort(int num_clients, int cohort_size, uint64_t seed, int round);

// Poisson sampling: each client position in [0, num_clients) joins independently
// with probability `rate`, so the cohort's size is Binomial(num_clients, rate) and
// may be 0. Sorted; the stream is fixed by (seed, round) alone. This is the
// sampling that the subsampled-Gaussian privacy analysis of user-level DP assumes.
// REQUIRES: 0 <= rate <= 1.
std::vector<int> SamplePoissonCohort(int num_clients, double rate, uint64_t seed, int round);

}  // namespace fl

#endif  // FL_CLIENT_SAMPLER_H_
