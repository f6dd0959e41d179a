#ifndef FL_SPEC_VALIDATION_H_
#define FL_SPEC_VALIDATION_H_

// The checks a spec's own fields get before anything is built: ranges, required
// fields, options that exclude each other, and what asynchronous mode and secure
// aggregation cannot run with. What needs the plugins (the aggregator's
// properties, the model's parameter groups) is checked where they are built
// (fl/experiment.cc, fl/personalization.h).

#include "fl/errors.h"
#include "fl/spec.pb.h"

namespace fl {

// Adds an error, named by its field, for each problem with `spec`'s fields.
void ValidateSpecFields(const fedkit::ExperimentSpec& spec, ErrorList& errors);

}  // namespace fl

#endif  // FL_SPEC_VALIDATION_H_
