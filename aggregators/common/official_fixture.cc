#include "aggregators/common/official_fixture.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <utility>

#include <torch/serialize.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace aggregators {

std::string FixturePath(const std::string& path) {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  return absl::StrCat(runfiles != nullptr ? runfiles : ".", "/fedkit/", path);
}

std::map<std::string, at::Tensor> ReadTensorFixture(const std::string& path) {
  std::map<std::string, at::Tensor> tensors;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read fixture " << path;
    return tensors;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  for (const auto& item : torch::pickle_load(bytes).toGenericDict()) {
    tensors[item.key().toStringRef()] = item.value().toTensor();
  }
  return tensors;
}

std::map<std::string, double> ReadScalarFixture(const std::string& path) {
  std::map<std::string, double> scalars;
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot read fixture " << path;
    return scalars;
  }
  std::string name;
  double value;
  while (in >> name >> value) scalars[name] = value;
  return scalars;
}

fl::ModelState FixtureState(const std::map<std::string, at::Tensor>& tensors,
                            const std::string& prefix, const std::vector<std::string>& names) {
  std::vector<fl::ModelState::Entry> entries;
  for (const std::string& name : names) {
    const auto it = tensors.find(prefix + name);
    if (it == tensors.end()) {
      ADD_FAILURE() << "the fixture has no tensor " << prefix + name;
      continue;
    }
    entries.push_back({name, it->second.clone(), false});
  }
  return fl::ModelState(std::move(entries));
}

}  // namespace aggregators
