#include "fl/proto_docs.h"

#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "glog/logging.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/descriptor_database.h"

namespace fl {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::SourceLocation;

std::vector<std::pair<const unsigned char*, std::size_t>>& Registered() {
  static auto* const sets = new std::vector<std::pair<const unsigned char*, std::size_t>>;
  return *sets;
}

// A pool over every registered set, built on first use. A file several sets hold
// (an import) is taken once: the sets come from one build, so its copies agree.
struct CommentedPool {
  google::protobuf::SimpleDescriptorDatabase database;
  std::unique_ptr<DescriptorPool> pool;

  CommentedPool() {
    std::set<std::string> files;
    for (const auto& [data, size] : Registered()) {
      google::protobuf::FileDescriptorSet set;
      // An embedded set comes from protoc in the build: failing to parse it is a
      // build defect, not a user error.
      CHECK(set.ParseFromArray(data, static_cast<int>(size))) << "corrupt embedded descriptor set";
      for (const google::protobuf::FileDescriptorProto& file : set.file()) {
        if (files.insert(file.name()).second) CHECK(database.Add(file)) << file.name();
      }
    }
    pool = std::make_unique<DescriptorPool>(&database);
  }
};

const DescriptorPool& Pool() {
  static const CommentedPool* const pool = new CommentedPool;
  return *pool->pool;
}

// Comment text without the space after each "//", trimmed of blank edge lines.
std::string Tidy(const std::string& raw) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(raw, '\n')) {
    absl::ConsumePrefix(&line, " ");
    lines.emplace_back(absl::StripTrailingAsciiWhitespace(line));
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  while (!lines.empty() && lines.front().empty()) lines.erase(lines.begin());
  return absl::StrJoin(lines, "\n");
}

template <typename Described>
std::string CommentOf(const Described* described) {
  SourceLocation location;
  if (described == nullptr || !described->GetSourceLocation(&location)) return "";
  return Tidy(location.leading_comments.empty() ? location.trailing_comments
                                                : location.leading_comments);
}

}  // namespace

bool RegisterDescriptorSet(const unsigned char* data, std::size_t size) {
  Registered().emplace_back(data, size);
  return true;
}

std::string FieldComment(const google::protobuf::FieldDescriptor& field) {
  const google::protobuf::Descriptor* message =
      Pool().FindMessageTypeByName(field.containing_type()->full_name());
  return CommentOf(message == nullptr ? nullptr : message->FindFieldByName(field.name()));
}

std::string MessageComment(const google::protobuf::Descriptor& message) {
  return CommentOf(Pool().FindMessageTypeByName(message.full_name()));
}

std::string EnumComment(const google::protobuf::EnumDescriptor& type) {
  return CommentOf(Pool().FindEnumTypeByName(type.full_name()));
}

std::string EnumValueComment(const google::protobuf::EnumValueDescriptor& value) {
  const google::protobuf::EnumDescriptor* type = Pool().FindEnumTypeByName(value.type()->full_name());
  return CommentOf(type == nullptr ? nullptr : type->FindValueByName(value.name()));
}

}  // namespace fl
