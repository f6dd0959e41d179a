#ifndef AGGREGATORS_COMMON_CONFORMANCE_REASONS_H_
#define AGGREGATORS_COMMON_CONFORMANCE_REASONS_H_

// What an aggregator plugin tells the shared conformance suite
// (aggregators/conformance_test.cc) beside its AggregatorProperties.
//
// The suite shows every property an aggregator declares false on small fixtures:
// some client order that changes its result, a lone client's update that does not
// come back unchanged. A declaration it cannot show there needs a reason,
// registered next to the plugin's FL_REGISTER_PLUGIN; so does an aggregator without
// partial sums, whose absence no fixture can show (any function of a finite set of
// updates is a function of enough of their power sums: leaving the sums out is a
// design choice, and the reason says which). The suite fails for a missing reason,
// and for a reason given where it does show the property (a stale one).
//
//   FL_CONFORMANCE_REASON("krum", kNoPartialSums,
//                         "a choice among whole updates by their pairwise distances");
//
// A reason may cover options too: it is looked up by the aggregator's registered
// name whatever options it was created with.

#include <string>
#include <vector>

namespace aggregators {

// A property an aggregator lacks, in AggregatorProperties or PartialSums().
enum class ConformanceClaim {
  kNotOrderInvariant,        // order_invariant = false
  kNotSingleClientIdentity,  // single_client_identity = false
  kNoPartialSums,            // PartialSums() is nullopt
};

struct ConformanceReason {
  const char* aggregator;
  ConformanceClaim claim;
  const char* reason;
  const char* file;
  int line;
};

// Every reason registered so far, in registration order. Registration only stores
// pointers in a function-local static (no work before main).
const std::vector<ConformanceReason>& ConformanceReasons();
bool RegisterConformanceReason(const ConformanceReason& reason);

// The reason registered for `claim` of `aggregator`, or nullptr.
const ConformanceReason* FindConformanceReason(const std::string& aggregator,
                                               ConformanceClaim claim);

const char* ConformanceClaimName(ConformanceClaim claim);

}  // namespace aggregators

#define FL_CONFORMANCE_REASON_CONCAT_INNER(a, b) a##b
#define FL_CONFORMANCE_REASON_CONCAT(a, b) FL_CONFORMANCE_REASON_CONCAT_INNER(a, b)

// Registers why `aggregator` (its registered name) lacks `claim` (a
// ConformanceClaim enumerator) in a way the conformance suite cannot show.
#define FL_CONFORMANCE_REASON(aggregator, claim, reason)                                    \
  [[maybe_unused]] static const bool FL_CONFORMANCE_REASON_CONCAT(fl_conformance_reason_,   \
                                                                  __LINE__) =               \
      ::aggregators::RegisterConformanceReason(                                             \
          {aggregator, ::aggregators::ConformanceClaim::claim, reason, __FILE__, __LINE__})

#endif  // AGGREGATORS_COMMON_CONFORMANCE_REASONS_H_
