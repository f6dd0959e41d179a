// Fuzz target: ParseLeafFile on arbitrary text. Every user it accepts has as many
// x as y; never a crash. What parses round-trips: the users written back as a
// LEAF file parse to the same users.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include "data/shakespeare/leaf_file.h"

namespace {

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "LEAF round trip: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::map<std::string, data::LeafUser> users;
  const absl::Status status = data::ParseLeafFile(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json", users);
  if (!status.ok()) return 0;

  fedkit::data::LeafJsonFile file;
  for (const auto& [name, user] : users) {
    if (user.data.x_size() != user.data.y_size()) Fail("a user has more x than y or fewer");
    file.add_users(name);
    file.add_num_samples(user.data.x_size());
    (*file.mutable_user_data())[name] = user.data;
  }
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(file, &json).ok()) {
    Fail("the users do not print as JSON");
  }
  std::map<std::string, data::LeafUser> reread;
  if (const absl::Status again = data::ParseLeafFile(json, "rewritten.json", reread); !again.ok()) {
    Fail("the users written back do not parse: " + again.ToString());
  }
  if (reread.size() != users.size()) Fail("the users written back are not as many");
  for (const auto& [name, user] : users) {
    auto it = reread.find(name);
    if (it == reread.end() ||
        !google::protobuf::util::MessageDifferencer::Equals(it->second.data, user.data)) {
      Fail("user \"" + name + "\" reads back differently");
    }
  }
  return 0;
}
