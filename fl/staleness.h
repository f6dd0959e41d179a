#ifndef FL_STALENESS_H_
#define FL_STALENESS_H_

// How much an asynchronous update counts when it arrives tau model versions
// after the version it was trained from (its staleness):
//
//   constant     s(tau) = 1
//   polynomial   s(tau) = (1 + tau)^-a                      (FedBuff: a = 1/2)
//   hinge        s(tau) = 1 if tau <= b, else 1 / (a (tau - b) + 1)
//
// (Xie et al., "Asynchronous Federated Optimization", 2019, section 5; Nguyen et
// al., "Federated Learning with Buffered Asynchronous Aggregation", AISTATS 2022.)
// An update staler than max_staleness is dropped (weight 0) and counted by the
// loop that asks.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "fl/spec.pb.h"

namespace fl {

struct Staleness {
  enum class Kind { kConstant, kPolynomial, kHinge };
  Kind kind = Kind::kConstant;
  // The polynomial's exponent, the hinge's slope (StalenessSpec.exponent): >= 0.
  double a = 0.0;
  // The hinge's knee (StalenessSpec.knee): versions of grace before the weight
  // falls. >= 0.
  int64_t b = 0;
  // Updates staler than this are dropped; unset: none is.
  std::optional<int64_t> max_staleness;

  // Errors name the spec's field under `path` (e.g. "server.async.staleness").
  absl::Status Check(const std::string& path) const;

  // s(tau), for tau >= 0 (0: trained from the current model). 0 beyond
  // max_staleness.
  double Weight(int64_t tau) const;
  bool Drops(int64_t tau) const { return max_staleness.has_value() && tau > *max_staleness; }
};

// server.async.staleness as a Staleness (exponent is a, knee is b).
Staleness StalenessFromSpec(const fedkit::StalenessSpec& spec);

}  // namespace fl

#endif  // FL_STALENESS_H_
