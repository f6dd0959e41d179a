#include "fl/plugin_schema.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fl/proto_docs.h"
#include "glog/logging.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace fl {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

std::string TypeName(const FieldDescriptor& field) {
  if (field.is_map()) {
    const Descriptor& entry = *field.message_type();
    return absl::StrCat("map<", TypeName(*entry.map_key()), ", ", TypeName(*entry.map_value()), ">");
  }
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_ENUM:
      return absl::StrCat("enum ", field.enum_type()->full_name());
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return absl::StrCat("message ", field.message_type()->full_name());
    default:
      return field.type_name();
  }
}

// `open` holds the message types being described on the way here: a field of one
// of those types is named but not expanded again.
void DescribeFields(const google::protobuf::Message* defaults, const Descriptor& type,
                    std::set<std::string>& open,
                    google::protobuf::RepeatedPtrField<fedkit::FieldSchema>* out) {
  open.insert(type.full_name());
  for (int i = 0; i < type.field_count(); ++i) {
    const FieldDescriptor& field = *type.field(i);
    fedkit::FieldSchema& schema = *out->Add();
    schema.set_name(field.name());
    schema.set_type(TypeName(field));
    schema.set_repeated(field.is_repeated() && !field.is_map());
    schema.set_has_presence(field.has_presence());
    schema.set_comment(FieldComment(field));
    // An enum field may be documented on its enum's declaration instead.
    if (schema.comment().empty() && field.enum_type() != nullptr) {
      schema.set_comment(EnumComment(*field.enum_type()));
    }
    if (field.enum_type() != nullptr) {
      for (int v = 0; v < field.enum_type()->value_count(); ++v) {
        const auto& value = *field.enum_type()->value(v);
        fedkit::FieldSchema::EnumValue& described = *schema.add_enum_values();
        described.set_name(value.name());
        described.set_comment(EnumValueComment(value));
      }
    }
    if (!field.is_repeated() && !field.has_presence() && defaults != nullptr) {
      std::string text;
      google::protobuf::TextFormat::PrintFieldValueToString(*defaults, &field, -1, &text);
      schema.set_default_value(text);
    }
    if (field.message_type() != nullptr && !field.is_map() &&
        !open.count(field.message_type()->full_name())) {
      // A set sub-message's values are the defaults its fields show; otherwise
      // (and for list elements) the type's own.
      const google::protobuf::Message* nested = nullptr;
      if (defaults != nullptr) {
        const google::protobuf::Reflection& reflection = *defaults->GetReflection();
        nested = field.is_repeated()
                     ? reflection.GetMessageFactory()->GetPrototype(field.message_type())
                     : &reflection.GetMessage(*defaults, &field);
      }
      DescribeFields(nested, *field.message_type(), open, schema.mutable_fields());
    }
  }
  open.erase(type.full_name());
}

void AppendField(const fedkit::FieldSchema& field, int depth, std::string& out) {
  const std::string indent(2 * depth, ' ');
  absl::StrAppend(&out, indent, field.name(), ": ", field.repeated() ? "repeated " : "",
                  field.has_presence() && field.type().rfind("message ", 0) != 0 ? "optional " : "",
                  field.type());
  if (!field.default_value().empty()) absl::StrAppend(&out, " = ", field.default_value());
  absl::StrAppend(&out, "\n");
  for (absl::string_view line : absl::StrSplit(field.comment(), '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, indent, "    ", line, "\n");
  }
  bool values_commented = false;
  std::vector<std::string> names;
  for (const auto& value : field.enum_values()) {
    names.push_back(value.name());
    values_commented = values_commented || !value.comment().empty();
  }
  if (!values_commented && !names.empty()) {
    absl::StrAppend(&out, indent, "    values: ", absl::StrJoin(names, ", "), "\n");
  } else if (values_commented) {
    absl::StrAppend(&out, indent, "    values:\n");
    for (const auto& value : field.enum_values()) {
      std::vector<absl::string_view> lines = absl::StrSplit(value.comment(), '\n', absl::SkipEmpty());
      absl::StrAppend(&out, indent, "      ", value.name(), lines.empty() ? "" : ": ",
                      lines.empty() ? "" : lines[0], "\n");
      for (size_t i = 1; i < lines.size(); ++i) {
        absl::StrAppend(&out, indent, "        ", lines[i], "\n");
      }
    }
  }
  for (const fedkit::FieldSchema& nested : field.fields()) AppendField(nested, depth + 1, out);
}

}  // namespace

fedkit::PluginSchema DescribePlugin(const std::string& name,
                                    const google::protobuf::Message& defaults) {
  fedkit::PluginSchema plugin;
  plugin.set_name(name);
  const Descriptor& type = *defaults.GetDescriptor();
  plugin.set_options_type(type.full_name());
  plugin.set_comment(MessageComment(type));
  std::set<std::string> open;
  DescribeFields(&defaults, type, open, plugin.mutable_fields());
  return plugin;
}

std::string FormatCatalog(const fedkit::PluginCatalog& catalog) {
  std::string out;
  for (const fedkit::PluginKindSchema& kind : catalog.kinds()) {
    absl::StrAppend(&out, kind.kind(), ":\n");
    if (kind.plugins().empty()) absl::StrAppend(&out, "  (none)\n");
    for (const fedkit::PluginSchema& plugin : kind.plugins()) {
      absl::StrAppendFormat(&out, "  %-20s %s\n", plugin.name(), plugin.options_type());
      if (plugin.fields().empty()) absl::StrAppend(&out, "      (no options)\n");
      for (const fedkit::FieldSchema& field : plugin.fields()) AppendField(field, 3, out);
    }
  }
  return out;
}

std::string CatalogJson(const fedkit::PluginCatalog& catalog) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string json;
  // Printing a message of a compiled-in type cannot fail.
  CHECK(google::protobuf::util::MessageToJsonString(catalog, &json, options).ok());
  return json;
}

}  // namespace fl
