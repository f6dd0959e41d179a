#include "aggregators/common/conformance_reasons.h"

#include <string>
#include <vector>

namespace aggregators {
namespace {

std::vector<ConformanceReason>& Reasons() {
  static auto* reasons = new std::vector<ConformanceReason>;
  return *reasons;
}

}  // namespace

const std::vector<ConformanceReason>& ConformanceReasons() { return Reasons(); }

bool RegisterConformanceReason(const ConformanceReason& reason) {
  Reasons().push_back(reason);
  return true;
}

const ConformanceReason* FindConformanceReason(const std::string& aggregator,
                                               ConformanceClaim claim) {
  for (const ConformanceReason& reason : Reasons()) {
    if (reason.claim == claim && aggregator == reason.aggregator) return &reason;
  }
  return nullptr;
}

const char* ConformanceClaimName(ConformanceClaim claim) {
  switch (claim) {
    case ConformanceClaim::kNotOrderInvariant:
      return "order_invariant = false";
    case ConformanceClaim::kNotSingleClientIdentity:
      return "single_client_identity = false";
    case ConformanceClaim::kNoPartialSums:
      return "no partial sums";
  }
  return "unknown claim";
}

}  // namespace aggregators
