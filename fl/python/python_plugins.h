#ifndef FL_PYTHON_PYTHON_PLUGINS_H_
#define FL_PYTHON_PYTHON_PLUGINS_H_

// Python classes as fedkit plugins: an aggregator (configure / accumulate /
// finalize, ...) or a client hook (before_training / loss_term / after_training)
// registered under a name in the same registries as the C++ plugins, so a spec
// names it, wrappers take it as their base and the conformance suite runs on it.
// Its options are a google.protobuf.Struct, passed to the class as keyword
// arguments. Tensors cross without copies; every call holds the GIL, which the
// engine otherwise leaves free. A Python exception becomes a Status naming the
// plugin and the method, with the traceback. docs/python.md describes the methods.

#include <string>

#include <pybind11/pybind11.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fl/model_state.h"

namespace fl::python {

// The state's tensors by name as torch.Tensor sharing their storage (no copy).
// REQUIRES: the GIL is held.
pybind11::dict ModelStateToDict(const ModelState& state);

// A dict of torch.Tensor by name in the layout of `like` (every name, shape and
// dtype; moved to its device), sharing storage where it is already there. Errors
// start with `what` and name the tensor. REQUIRES: the GIL is held.
absl::StatusOr<ModelState> ModelStateFromDict(const pybind11::handle& dict, const ModelState& like,
                                              const std::string& what);

// Registers `cls` under `name`; `file` and `line` say where (in messages). A name
// taken by a C++ plugin is AlreadyExists; one taken by a Python plugin is
// replaced. REQUIRES: the GIL is held.
absl::Status RegisterPythonAggregator(const std::string& name, pybind11::object cls,
                                      const std::string& file, int line);
absl::Status RegisterPythonClientHook(const std::string& name, pybind11::object cls,
                                      const std::string& file, int line);

}  // namespace fl::python

#endif  // FL_PYTHON_PYTHON_PLUGINS_H_
