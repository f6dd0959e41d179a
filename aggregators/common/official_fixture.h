#ifndef AGGREGATORS_COMMON_OFFICIAL_FIXTURE_H_
#define AGGREGATORS_COMMON_OFFICIAL_FIXTURE_H_

// Reading the fixtures tools/side_by_side/ makes from official code, for the
// *_official_test targets: tensors saved by torch.save as one dict from name to
// tensor, and scalars as lines "name value". Test-only; a file that cannot be
// read is a test failure naming it.

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "fl/model_state.h"

namespace aggregators {

// The path of `path` (relative to the workspace root) among the test's runfiles.
std::string FixturePath(const std::string& path);

std::map<std::string, at::Tensor> ReadTensorFixture(const std::string& path);

std::map<std::string, double> ReadScalarFixture(const std::string& path);

// The parameters `names`, each the fixture's tensor prefix + name (cloned).
fl::ModelState FixtureState(const std::map<std::string, at::Tensor>& tensors,
                            const std::string& prefix, const std::vector<std::string>& names);

}  // namespace aggregators

#endif  // AGGREGATORS_COMMON_OFFICIAL_FIXTURE_H_
