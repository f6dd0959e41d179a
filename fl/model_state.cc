#include "fl/model_state.h"

#include <cmath>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace fl {

namespace {

// The module's parameters then buffers, sharing the module's storage.
ModelState Views(const torch::nn::Module& module) {
  std::vector<ModelState::Entry> entries;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    entries.push_back({item.key(), item.value().detach(), false});
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    entries.push_back({item.key(), item.value().detach(), true});
  }
  return ModelState(std::move(entries));
}

}  // namespace

ModelState ModelState::FromModule(const torch::nn::Module& module) { return Views(module).Clone(); }

ModelState ModelState::DifferenceFromModule(const torch::nn::Module& module,
                                            const ModelState& base) {
  return Difference(Views(module), base);
}

absl::Status ModelState::LoadInto(torch::nn::Module& module) const {
  ModelState target = Views(module);
  if (absl::Status layout = target.CheckSameLayout(*this); !layout.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model state does not fit the model: ", layout.message()));
  }
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < entries_.size(); ++i) target.entries_[i].tensor.copy_(entries_[i].tensor);
  return absl::OkStatus();
}

ModelState ModelState::Clone() const {
  std::vector<Entry> entries;
  entries.reserve(entries_.size());
  for (const Entry& e : entries_) entries.push_back({e.name, e.tensor.clone(), e.is_buffer});
  return ModelState(std::move(entries));
}

ModelState ModelState::Without(const std::set<std::string>& names) const {
  std::vector<Entry> entries;
  for (const Entry& e : entries_) {
    if (names.count(e.name) == 0) entries.push_back(e);
  }
  return ModelState(std::move(entries));
}

absl::StatusOr<ModelState> ModelState::WithReplaced(
    const std::map<std::string, at::Tensor>& part) const {
  ModelState replaced = *this;
  size_t found = 0;
  for (Entry& e : replaced.entries_) {
    auto it = part.find(e.name);
    if (it == part.end()) continue;
    if (it->second.sizes() != e.tensor.sizes() || it->second.dtype() != e.tensor.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", e.name, "\" is ", c10::str(it->second.sizes()), " ", std::string(it->second.dtype().name()),
          ", expected ", c10::str(e.tensor.sizes()), " ", std::string(e.tensor.dtype().name())));
    }
    e.tensor = it->second;
    ++found;
  }
  if (found != part.size()) {
    for (const auto& [name, tensor] : part) {
      bool here = false;
      for (const Entry& e : entries_) here = here || e.name == name;
      if (!here) return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" is not in the model"));
    }
  }
  return replaced;
}

std::map<std::string, at::Tensor> ModelState::TensorsByName() const {
  std::map<std::string, at::Tensor> tensors;
  for (const Entry& e : entries_) tensors.emplace(e.name, e.tensor);
  return tensors;
}

ModelState ModelState::ZerosLike() const {
  std::vector<Entry> entries;
  entries.reserve(entries_.size());
  for (const Entry& e : entries_) entries.push_back({e.name, at::zeros_like(e.tensor), e.is_buffer});
  return ModelState(std::move(entries));
}

absl::Status ModelState::CheckSameLayout(const ModelState& other) const {
  if (entries_.size() != other.entries_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", entries_.size(),
                                                   " tensors, got ", other.entries_.size()));
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& a = entries_[i];
    const Entry& b = other.entries_[i];
    if (a.name != b.name || a.is_buffer != b.is_buffer) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", i, ": expected \"", a.name, "\"", a.is_buffer ? " (buffer)" : "",
                       ", got \"", b.name, "\"", b.is_buffer ? " (buffer)" : ""));
    }
    if (!a.tensor.sizes().equals(b.tensor.sizes())) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", a.name, "\": expected shape ",
                                                     c10::str(a.tensor.sizes()), ", got ",
                                                     c10::str(b.tensor.sizes())));
    }
    if (a.tensor.scalar_type() != b.tensor.scalar_type()) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", a.name, "\": expected dtype ",
                                                     c10::toString(a.tensor.scalar_type()), ", got ",
                                                     c10::toString(b.tensor.scalar_type())));
    }
  }
  return absl::OkStatus();
}

void ModelState::Axpy(double parameter_alpha, double buffer_alpha, const ModelState& x) {
  CHECK_EQ(entries_.size(), x.entries_.size());
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < entries_.size(); ++i) {
    at::Tensor& y = entries_[i].tensor;
    const double alpha = entries_[i].is_buffer ? buffer_alpha : parameter_alpha;
    if (at::isFloatingType(y.scalar_type())) {
      y.add_(x.entries_[i].tensor, alpha);
    } else {
      y.copy_(at::round(y.to(at::kDouble) + alpha * x.entries_[i].tensor.to(at::kDouble)));
    }
  }
}

bool ModelState::ClipParameterNorm(double bound, double norm) {
  if (!(norm > bound)) return false;
  at::NoGradGuard no_grad;
  for (Entry& e : entries_) {
    if (!e.is_buffer) e.tensor.mul_(bound / norm);
  }
  return true;
}

void ModelState::Scale(double alpha) {
  at::NoGradGuard no_grad;
  for (Entry& e : entries_) {
    if (at::isFloatingType(e.tensor.scalar_type())) {
      e.tensor.mul_(alpha);
    } else {
      e.tensor.copy_(at::round(e.tensor.to(at::kDouble) * alpha));
    }
  }
}

ModelState ModelState::Scaled(double alpha) const {
  std::vector<Entry> entries;
  entries.reserve(entries_.size());
  for (const Entry& e : entries_) {
    entries.push_back({e.name,
                       at::isFloatingType(e.tensor.scalar_type())
                           ? at::mul(e.tensor, alpha)
                           : at::round(e.tensor.to(at::kDouble) * alpha).to(e.tensor.scalar_type()),
                       e.is_buffer});
  }
  return ModelState(std::move(entries));
}

ModelState ModelState::Sum(const ModelState& a, double alpha, double buffer_alpha,
                           const ModelState& b) {
  CHECK_EQ(a.entries_.size(), b.entries_.size());
  std::vector<Entry> entries;
  entries.reserve(a.entries_.size());
  for (size_t i = 0; i < a.entries_.size(); ++i) {
    const Entry& x = a.entries_[i];
    const double scale = x.is_buffer ? buffer_alpha : alpha;
    const at::Tensor& y = b.entries_[i].tensor;
    entries.push_back(
        {x.name,
         at::isFloatingType(x.tensor.scalar_type())
             ? at::add(x.tensor, y, scale)
             : at::round(x.tensor.to(at::kDouble) + scale * y.to(at::kDouble)).to(x.tensor.scalar_type()),
         x.is_buffer});
  }
  return ModelState(std::move(entries));
}

ModelState ModelState::Difference(const ModelState& a, const ModelState& b) {
  CHECK_EQ(a.entries_.size(), b.entries_.size());
  std::vector<Entry> entries;
  entries.reserve(a.entries_.size());
  for (size_t i = 0; i < a.entries_.size(); ++i) {
    entries.push_back({a.entries_[i].name, a.entries_[i].tensor - b.entries_[i].tensor,
                       a.entries_[i].is_buffer});
  }
  return ModelState(std::move(entries));
}

namespace {

// sum(a * b) accumulated in float64. Large float32 CPU tensors go through BLAS dot
// products over 64K-element chunks whose results are summed in float64: 30x faster
// than converting to float64, with a relative error of ~3e-8 against the exact sum
// (measured on 1.6M normal entries). Smaller ones sum their element products in
// float64 (each product rounded once to float32).
double DotOf(const at::Tensor& a, const at::Tensor& b) {
  constexpr int64_t kChunk = int64_t{1} << 16;
  const at::Tensor x = a.reshape({-1});
  const at::Tensor y = b.reshape({-1});
  const int64_t n = x.numel();
  if (x.scalar_type() != y.scalar_type() || !at::isFloatingType(x.scalar_type())) {
    return at::sum(x.to(at::kDouble) * y.to(at::kDouble)).item<double>();
  }
  if (n <= kChunk || !x.device().is_cpu() || x.scalar_type() != at::kFloat) {
    return (x * y).sum(at::kDouble).item<double>();
  }
  double sum = 0.0;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t length = std::min(kChunk, n - begin);
    sum += at::dot(x.narrow(0, begin, length), y.narrow(0, begin, length)).item<double>();
  }
  return sum;
}

}  // namespace

double ModelState::Dot(const ModelState& other) const {
  CHECK_EQ(entries_.size(), other.entries_.size());
  double sum = 0.0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].is_buffer) continue;
    sum += DotOf(entries_[i].tensor, other.entries_[i].tensor);
  }
  return sum;
}

double ModelState::SquaredNorm() const { return Dot(*this); }

bool ModelState::AllFinite() const {
  for (const Entry& e : entries_) {
    if (!at::isFloatingType(e.tensor.scalar_type()) || e.tensor.numel() == 0) continue;
    // One reduction pass and no element-wise temporary: min and max propagate NaN
    // and are infinite exactly when some entry is. Unlike a sum, they cannot
    // overflow on a finite tensor of large values.
    const auto [lo, hi] = at::aminmax(e.tensor);
    if (!std::isfinite(lo.item<double>()) || !std::isfinite(hi.item<double>())) return false;
  }
  return true;
}

int64_t ModelState::NumElements() const {
  int64_t n = 0;
  for (const Entry& e : entries_) n += e.tensor.numel();
  return n;
}

int64_t ModelState::NumBytes() const {
  int64_t n = 0;
  for (const Entry& e : entries_) n += e.tensor.numel() * e.tensor.element_size();
  return n;
}

int64_t ModelState::NumParameters() const {
  int64_t n = 0;
  for (const Entry& e : entries_) {
    if (!e.is_buffer) n += e.tensor.numel();
  }
  return n;
}

int64_t NumBytes(const ExtraStates& extras) {
  int64_t n = 0;
  for (const auto& [name, state] : extras) n += state.NumBytes();
  return n;
}

}  // namespace fl
