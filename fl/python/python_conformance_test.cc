// The shared conformance suites (aggregators/conformance_test.cc,
// aggregators/hook_conformance_test.cc) run on plugins written in Python: this
// program starts an interpreter, registers the Python FedAvg
// (examples/fedavg.py) and proximal hook (examples/proximal.py) under
// "python_fedavg" and "python_prox", and runs the suites' tests for those names.
// The C++ plugins have their own run of the suites.

#include <pybind11/embed.h>

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "fl/python/python_plugins.h"
#include "gtest/gtest.h"

namespace {

namespace py = pybind11;

void RegisterExamples() {
  py::module_::import("torch");
  py::module_::import("sys").attr("path").attr("insert")(0, "fl/python/examples");
  const std::string file = "fl/python/examples/";
  absl::Status status = fl::python::RegisterPythonAggregator(
      "python_fedavg", py::module_::import("fedavg").attr("FedAvg"), file + "fedavg.py", 0);
  if (status.ok()) {
    status = fl::python::RegisterPythonClientHook(
        "python_prox", py::module_::import("proximal").attr("Proximal"), file + "proximal.py", 0);
  }
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  py::scoped_interpreter interpreter;
  RegisterExamples();
  // The suites' parameters (registered names) are read when gtest initialises,
  // so the Python plugins are in by then. Only their tests run here.
  GTEST_FLAG_SET(filter, "*/python_*");
  ::testing::InitGoogleTest(&argc, argv);
  int code = 0;
  {
    // Let go of the GIL: the plugins take it for each call, from whichever thread.
    py::gil_scoped_release release;
    code = RUN_ALL_TESTS();
  }
  // A filter that matched nothing would pass with zero tests: each plugin must
  // have run through its suite.
  for (const char* plugin : {"python_fedavg", "python_prox"}) {
    int ran = 0;
    const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
    for (int i = 0; i < unit.total_test_suite_count(); ++i) {
      const testing::TestSuite& suite = *unit.GetTestSuite(i);
      for (int j = 0; j < suite.total_test_count(); ++j) {
        const testing::TestInfo& test = *suite.GetTestInfo(j);
        if (test.should_run() && absl::StrContains(test.name(), plugin)) ++ran;
      }
    }
    if (ran == 0) {
      std::fprintf(stderr, "no conformance test ran for %s\n", plugin);
      code = 1;
    }
  }
  return code;
}
