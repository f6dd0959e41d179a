// fedkit._fedkit: the C++ engine for Python (the `fedkit` package wraps it; see
// docs/python.md). Specs cross as text format, metrics rows as dicts, models as
// dicts of torch.Tensor sharing the C++ tensors' storage (python3-torch is built
// on the same libtorch1.13).

#include <torch/extension.h>

#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/dataset.h"
#include "fl/experiment.h"
#include "fl/metrics_sink.h"
#include "fl/model.h"
#include "fl/model_file.h"
#include "fl/partitioner.h"
#include "fl/plugin_schema.h"
#include "fl/python/python_plugins.h"
#include "fl/spec_loader.h"
#include "google/protobuf/util/json_util.h"

namespace fl::python {
namespace {

namespace py = pybind11;

// A Python exception for the spec's problems, one per entry of `errors`.
PyObject* spec_error = nullptr;

[[noreturn]] void ThrowSpecError(const absl::Status& status) {
  std::vector<std::string> errors = absl::StrSplit(status.message(), '\n', absl::SkipEmpty());
  py::object error = py::reinterpret_borrow<py::object>(spec_error)(
      std::string(status.message()), py::cast(errors));
  PyErr_SetObject(spec_error, error.ptr());
  throw py::error_already_set();
}

fedkit::ExperimentSpec Parse(const std::string& text) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec(text, "spec");
  if (!spec.ok()) ThrowSpecError(spec.status());
  return *std::move(spec);
}

// A spec given as protobuf's JSON mapping (what a Python dict becomes), as text.
std::string SpecFromJson(const std::string& json) {
  fedkit::ExperimentSpec spec;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &spec);
  if (!status.ok()) {
    ThrowSpecError(absl::InvalidArgumentError(std::string(status.message())));
  }
  return SpecToText(spec);
}

std::string SpecFromFile(const std::string& path) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = LoadSpecFile(path);
  if (!spec.ok()) ThrowSpecError(spec.status());
  return SpecToText(*spec);
}

// Every problem of the spec, as the runner reports them (field path first); empty
// when it can run.
std::vector<std::string> Validate(const std::string& text) {
  absl::StatusOr<Experiment> experiment = BuildExperiment(Parse(text));
  if (experiment.ok()) return {};
  return absl::StrSplit(experiment.status().message(), '\n', absl::SkipEmpty());
}

py::dict RowToDict(const MetricsRow& row) {
  py::dict d;
  d["round"] = row.round;
  d["test_accuracy"] = row.test_accuracy;
  d["test_loss"] = row.test_loss;
  d["train_loss"] = row.train_loss;
  d["clients"] = row.clients;
  d["rejected"] = row.rejected;
  d["incomplete"] = row.incomplete;
  d["dropped"] = row.dropped;
  d["bytes_up"] = row.bytes_up;
  d["bytes_down"] = row.bytes_down;
  d["seconds"] = row.seconds;
  for (const auto& [reason, count] : row.rejected_by_reason) {
    d[("rejected_" + reason).c_str()] = count;
  }
  for (const auto& [name, value] : row.diagnostics) d[name.c_str()] = value;
  return d;
}

// Runs the spec into `output_dir` with the GIL released (workers train in
// parallel). `on_round(row, model)` is called after each evaluated round, with
// `model` None unless `with_model`; returning False ends the run there. An
// exception raised by it ends the run and is raised again here.
py::tuple Run(const std::string& text, const std::string& output_dir, py::object on_round,
              bool with_model) {
  absl::StatusOr<Experiment> experiment = BuildExperiment(Parse(text));
  if (!experiment.ok()) ThrowSpecError(experiment.status());
  std::exception_ptr raised;
  RoundObserver observer;
  if (!on_round.is_none()) {
    observer = [&](const MetricsRow& row, const ModelState& global) {
      py::gil_scoped_acquire gil;
      try {
        py::object model = with_model ? py::object(ModelStateToDict(global)) : py::none();
        py::object verdict = on_round(RowToDict(row), model);
        return verdict.is_none() || verdict.cast<bool>();
      } catch (...) {
        raised = std::current_exception();
        return false;
      }
    };
  }
  absl::StatusOr<ExperimentResult> result;
  {
    py::gil_scoped_release release;
    result = RunExperiment(*experiment, output_dir, nullptr, std::move(observer));
  }
  if (raised) std::rethrow_exception(raised);
  if (!result.ok()) throw std::runtime_error(std::string(result.status().message()));
  py::list rows;
  for (const MetricsRow& row : result->rows) rows.append(RowToDict(row));
  return py::make_tuple(rows, ModelStateToDict(result->final_model));
}

// Every registry with its plugins' option schemas, as JSON (what
// `run_experiment --list=json` prints).
std::string PluginCatalogJson() {
  fedkit::PluginCatalog catalog;
  *catalog.add_kinds() = DescribeKind<Dataset>();
  *catalog.add_kinds() = DescribeKind<Partitioner>();
  *catalog.add_kinds() = DescribeKind<Model>();
  *catalog.add_kinds() = DescribeKind<Aggregator>();
  *catalog.add_kinds() = DescribeKind<ClientHook>();
  return CatalogJson(catalog);
}

// The test-split accuracy and loss of `model` (a path to a model.pt, or a dict
// of tensors by name) under the spec's model, dataset and evaluation batch size.
py::dict EvaluateModel(const std::string& text, py::object model) {
  absl::StatusOr<Experiment> experiment = BuildExperiment(Parse(text));
  if (!experiment.ok()) ThrowSpecError(experiment.status());
  std::function<absl::StatusOr<ModelState>(const ModelState&)> read;
  std::string path;
  if (py::isinstance<py::str>(model) || py::hasattr(model, "__fspath__")) {
    path = py::str(py::module_::import("os").attr("fspath")(model));
    read = [&path](const ModelState& layout) { return ReadModelFile(path, layout); };
  } else {
    read = [&model](const ModelState& layout) {
      py::gil_scoped_acquire gil;
      return ModelStateFromDict(model, layout, "model");
    };
  }
  absl::StatusOr<Evaluation> evaluation;
  {
    py::gil_scoped_release release;
    evaluation = EvaluateOnTestSplit(*experiment, read);
  }
  if (!evaluation.ok()) throw py::value_error(std::string(evaluation.status().message()));
  py::dict d;
  d["test_accuracy"] = evaluation->accuracy;
  d["test_loss"] = evaluation->loss;
  d["examples"] = evaluation->examples;
  return d;
}

// Raises ValueError with the status's message unless it is OK.
void RaiseUnlessOk(const absl::Status& status) {
  if (!status.ok()) throw py::value_error(std::string(status.message()));
}

}  // namespace
}  // namespace fl::python

PYBIND11_MODULE(_fedkit, m) {
  namespace py = pybind11;
  using namespace fl::python;  // NOLINT: the module's own functions
  m.doc() = "fedkit's C++ engine; use the fedkit package.";
  py::module_::import("torch");  // tensors cross through torch's own type
  py::object base = py::module_::import("builtins").attr("ValueError");
  spec_error = PyErr_NewException("fedkit._fedkit.SpecError", base.ptr(), nullptr);
  m.attr("SpecError") = py::handle(spec_error);
  m.def("spec_from_text", [](const std::string& text) { return fl::SpecToText(Parse(text)); },
        "The spec in text format, parsed and written back; SpecError when it does not parse.");
  m.def("spec_from_json", &SpecFromJson, "A spec from protobuf's JSON mapping, as text.");
  m.def("spec_from_file", &SpecFromFile, "A spec file (with its includes), as text.");
  m.def("validate", &Validate, "Every problem of the spec, one per entry; [] when it can run.");
  m.def("run", &Run, py::arg("spec"), py::arg("output_dir"), py::arg("on_round") = py::none(),
        py::arg("with_model") = false,
        "Runs the spec; returns (rows, final model as a dict of tensors).");
  m.def("evaluate", &EvaluateModel, py::arg("spec"), py::arg("model"),
        "Test-split accuracy and loss of a model.pt path or a dict of tensors.");
  m.def(
      "register_aggregator",
      [](const std::string& name, py::object cls, const std::string& file, int line) {
        RaiseUnlessOk(fl::python::RegisterPythonAggregator(name, std::move(cls), file, line));
      },
      "Registers a Python class as an aggregator.");
  m.def(
      "register_client_hook",
      [](const std::string& name, py::object cls, const std::string& file, int line) {
        RaiseUnlessOk(fl::python::RegisterPythonClientHook(name, std::move(cls), file, line));
      },
      "Registers a Python class as a client hook.");
  m.def("plugin_catalog_json", &PluginCatalogJson,
        "Every registry's plugins with their options' fields, as JSON.");
}
