#ifndef FL_MODEL_STATE_H_
#define FL_MODEL_STATE_H_

// A model's named tensors in a fixed order: parameters, then buffers (BatchNorm
// running statistics and the like) flagged as such. Every aggregator works on
// ModelStates through the helpers here, so arithmetic lives in one place.
//
// Sign convention: a client's update is `delta = w_local - w_global`.

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace fl {

class ModelState {
 public:
  struct Entry {
    std::string name;
    at::Tensor tensor;
    bool is_buffer = false;
  };

  ModelState() = default;
  explicit ModelState(std::vector<Entry> entries) : entries_(std::move(entries)) {}

  // Detached copies of the module's parameters and buffers, in registration order.
  static ModelState FromModule(const torch::nn::Module& module);

  // module's state - base, without an intermediate copy of the module's state.
  // REQUIRES: the same layout.
  static ModelState DifferenceFromModule(const torch::nn::Module& module, const ModelState& base);

  // Copies this state into `module`; names, shapes and dtypes must match.
  absl::Status LoadInto(torch::nn::Module& module) const;

  const std::vector<Entry>& entries() const { return entries_; }
  std::vector<Entry>& mutable_entries() { return entries_; }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const at::Tensor& tensor(size_t i) const { return entries_[i].tensor; }
  at::Tensor& mutable_tensor(size_t i) { return entries_[i].tensor; }

  // Deep copy.
  ModelState Clone() const;
  // The entries whose names are not in `names`, in order, sharing their tensors:
  // the shared part of a model whose other tensors stay with the clients.
  ModelState Without(const std::set<std::string>& names) const;
  // This state with the entries named in `part` replaced by part's tensors; the
  // others shared. InvalidArgument, naming the entry, when a name in `part` is not
  // here or its shape or dtype differs.
  absl::StatusOr<ModelState> WithReplaced(const std::map<std::string, at::Tensor>& part) const;
  // Name -> tensor, sharing the tensors.
  std::map<std::string, at::Tensor> TensorsByName() const;
  // Same names, shapes and dtypes, all zeros.
  ModelState ZerosLike() const;

  // OK when `other` has the same names, shapes, dtypes and buffer flags in the
  // same order.
  absl::Status CheckSameLayout(const ModelState& other) const;

  // this += alpha * x, in place, parameters and buffers alike.
  void Axpy(double alpha, const ModelState& x) { Axpy(alpha, alpha, x); }
  // this += alpha * x for parameters and buffer_alpha * x for buffers, in place.
  // Integer tensors (e.g. BatchNorm's num_batches_tracked) are rounded.
  void Axpy(double parameter_alpha, double buffer_alpha, const ModelState& x);
  // this *= alpha, in place.
  void Scale(double alpha);
  // alpha * this, as a new state in one pass.
  ModelState Scaled(double alpha) const;
  // a + alpha * b over parameters and a + buffer_alpha * b over buffers, as a new
  // state in one pass (no copy of a first). Integer tensors are rounded.
  static ModelState Sum(const ModelState& a, double alpha, double buffer_alpha, const ModelState& b);
  // a - b, entry by entry.
  static ModelState Difference(const ModelState& a, const ModelState& b);

  // Sums over parameters only (buffers excluded), accumulated in float64.
  double Dot(const ModelState& other) const;
  double SquaredNorm() const;
  // Scales the parameters (not the buffers) down to L2 norm `bound` when their
  // norm, `norm` if the caller has it, exceeds it; whether it did.
  bool ClipParameterNorm(double bound) { return ClipParameterNorm(bound, std::sqrt(SquaredNorm())); }
  bool ClipParameterNorm(double bound, double norm);

  // False if any floating entry holds a NaN or an infinity.
  bool AllFinite() const;

  int64_t NumElements() const;
  int64_t NumBytes() const;
  // Parameters only.
  int64_t NumParameters() const;

 private:
  std::vector<Entry> entries_;
};

// Named extra tensor sets a client sends or a server broadcasts (SCAFFOLD's
// control variates, Elastic's sensitivities, ...), each shaped as its method needs.
using ExtraStates = std::map<std::string, ModelState>;

int64_t NumBytes(const ExtraStates& extras);

}  // namespace fl

#endif  // FL_MODEL_STATE_H_
