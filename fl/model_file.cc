#include "fl/model_file.h"

#include <fstream>
#include <iterator>
#include <vector>

#include <torch/serialize.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fl/atomic_file.h"

namespace fl {

absl::Status WriteModelFile(const std::string& path, const ModelState& state) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const ModelState::Entry& entry : state.entries()) {
    // A copy of its own: pickling a view saves its whole storage, so the same
    // weights would make different files.
    dict.insert(entry.name, entry.tensor.detach().to(at::kCPU).clone(at::MemoryFormat::Contiguous));
  }
  const std::vector<char> bytes = torch::pickle_save(dict);
  return WriteFileAtomically(path, absl::string_view(bytes.data(), bytes.size()));
}

absl::StatusOr<ModelState> ReadModelFile(const std::string& path, const ModelState& layout) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open model file ", path));
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const c10::Error& e) {
    return absl::DataLossError(
        absl::StrCat(path, " is not a pickled tensor dict: ", e.what_without_backtrace()));
  }
  if (!value.isGenericDict()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds a ", value.tagKind(), ", not a dict of tensors"));
  }
  std::map<std::string, at::Tensor> tensors;
  for (const auto& item : value.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": every entry must map a name to a tensor"));
    }
    tensors[item.key().toStringRef()] = item.value().toTensor();
  }
  std::vector<ModelState::Entry> entries;
  for (const ModelState::Entry& want : layout.entries()) {
    auto it = tensors.find(want.name);
    if (it == tensors.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, " has no tensor \"", want.name, "\""));
    }
    if (!it->second.sizes().equals(want.tensor.sizes())) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": \"", want.name, "\" has shape [",
                       absl::StrJoin(it->second.sizes(), ", "), "], the model [",
                       absl::StrJoin(want.tensor.sizes(), ", "), "]"));
    }
    entries.push_back({want.name, it->second.to(want.tensor.options()), want.is_buffer});
    tensors.erase(it);
  }
  if (!tensors.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, " has a tensor the model lacks: \"",
                                                   tensors.begin()->first, "\""));
  }
  return ModelState(std::move(entries));
}

}  // namespace fl
