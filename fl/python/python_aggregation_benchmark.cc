// The aggregation benchmark (aggregators/aggregation_benchmark.cc) with the
// Python example aggregators registered beside the C++ ones, to measure what a
// method written in Python costs per round against its C++ twin on the same
// inputs:
//
//   bazel run -c opt //fl/python:python_aggregation_benchmark -- --benchmark_filter='aggregate/(python_)?fedavgm?/'

#include <pybind11/embed.h>

#include <cstdio>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "aggregators/aggregation_benchmark.h"
#include "fl/python/python_plugins.h"

namespace py = pybind11;

int main(int argc, char** argv) {
  py::scoped_interpreter interpreter;
  py::module_::import("torch");
  py::module_::import("sys").attr("path").attr("insert")(0, "fl/python/examples");
  for (const auto& [name, module, cls] :
       {std::tuple<const char*, const char*, const char*>{"python_fedavg", "fedavg", "FedAvg"},
        {"python_fedavgm", "fedavgm", "FedAvgM"}}) {
    const absl::Status status = fl::python::RegisterPythonAggregator(
        name, py::module_::import(module).attr(cls), std::string(module) + ".py", 0);
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
      return 1;
    }
  }
  py::gil_scoped_release release;  // each call into Python takes it
  return aggregators::AggregationBenchmarkMain(argc, argv);
}
