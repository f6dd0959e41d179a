// How far apart two model files (model.pt) are: prints
//   max_abs_diff D  max_abs A  tensors N
// over every tensor both hold (as doubles), and fails (exit 1, nothing on stdout)
// when their names or shapes differ, when a file holds no tensor, or when a weight
// is not finite (NaN would otherwise vanish from the maximum); exit 2 when a file
// cannot be read. For tests that compare runs within a tolerance.
//
//   model_diff A/model.pt B/model.pt

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/serialize.h>

namespace {

std::map<std::string, at::Tensor> Read(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", path);
    std::exit(2);
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, at::Tensor> tensors;
  try {
    for (const auto& item : torch::pickle_load(bytes).toGenericDict()) {
      tensors[item.key().toStringRef()] = item.value().toTensor().to(at::kDouble);
    }
  } catch (const std::exception& e) {
    // c10::Error appends a backtrace; its first line is the message.
    std::string message = e.what();
    message.resize(std::min(message.size(), message.find('\n')));
    std::fprintf(stderr, "cannot read %s as a model file: %s\n", path, message.c_str());
    std::exit(2);
  }
  if (tensors.empty()) {
    std::fprintf(stderr, "%s holds no tensor\n", path);
    std::exit(1);
  }
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.isfinite().all().item<bool>()) {
      std::fprintf(stderr, "\"%s\" in %s is not finite\n", name.c_str(), path);
      std::exit(1);
    }
  }
  return tensors;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: model_diff A.pt B.pt\n");
    return 2;
  }
  const auto a = Read(argv[1]);
  const auto b = Read(argv[2]);
  if (a.size() != b.size()) {
    std::fprintf(stderr, "%zu tensors vs %zu\n", a.size(), b.size());
    return 1;
  }
  double max_diff = 0.0, max_abs = 0.0;
  for (const auto& [name, tensor] : a) {
    auto other = b.find(name);
    if (other == b.end() || !other->second.sizes().equals(tensor.sizes())) {
      std::fprintf(stderr, "\"%s\" is missing or has another shape in %s\n", name.c_str(), argv[2]);
      return 1;
    }
    if (tensor.numel() == 0) continue;
    max_diff = std::max(max_diff, (tensor - other->second).abs().max().item<double>());
    max_abs = std::max(max_abs, tensor.abs().max().item<double>());
  }
  std::printf("max_abs_diff %.9g  max_abs %.9g  tensors %zu\n", max_diff, max_abs, a.size());
  return 0;
}
