#include "fl/client_sampler.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "fl/seeding.h"
#include "glog/logging.h"

namespace fl {

std::vector<int> SampleCohort(int num_clients, int cohort_size, uint64_t seed, int round) {
  CHECK_GT(cohort_size, 0);
  CHECK_LE(cohort_size, num_clients);
  std::mt19937_64 rng(DeriveSeed(seed, SeedStream::kClientSampling, {static_cast<uint64_t>(round)}));
  std::vector<int> ids(num_clients);
  std::iota(ids.begin(), ids.end(), 0);
  // Partial Fisher-Yates: the first cohort_size positions are a uniform sample.
  for (int i = 0; i < cohort_size; ++i) {
    std::uniform_int_distribution<int> pick(i, num_clients - 1);
    std::swap(ids[i], ids[pick(rng)]);
  }
  ids.resize(cohort_size);
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<int> SamplePoissonCohort(int num_clients, double rate, uint64_t seed, int round) {
  CHECK(rate >= 0.0 && rate <= 1.0) << rate;
  std::mt19937_64 rng(DeriveSeed(seed, SeedStream::kClientSampling, {static_cast<uint64_t>(round)}));
  std::bernoulli_distribution joins(rate);
  std::vector<int> ids;
  for (int id = 0; id < num_clients; ++id) {
    if (joins(rng)) ids.push_back(id);
  }
  return ids;
}

}  // namespace fl
