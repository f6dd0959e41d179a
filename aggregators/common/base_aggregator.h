#ifndef AGGREGATORS_COMMON_BASE_AGGREGATOR_H_
#define AGGREGATORS_COMMON_BASE_AGGREGATOR_H_

// The `base` of a wrapping aggregator (elastic, efl): the aggregator whose step it
// builds on, from a spec's PluginSpec ("fedavg" when unnamed). Not a plugin.

#include <memory>
#include <string>

#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/spec.pb.h"

namespace aggregators {

// Null, with the problem recorded in `errors` under "options.base", when the base
// is the wrapper itself (`wrapper`), unknown, or fails to build from its options.
std::unique_ptr<fl::Aggregator> CreateBaseAggregator(const fedkit::PluginSpec& base,
                                                     const std::string& wrapper,
                                                     fl::ErrorList& errors);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_BASE_AGGREGATOR_H_
