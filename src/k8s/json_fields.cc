#include "k8s/json_fields.h"

#include <utility>
#include <vector>

namespace berth {

using nlohmann::json;

const json* Field(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

std::string FieldText(const json& object, const char* key) {
  const json* value = Field(object, key);
  return value != nullptr && value->is_string() ? value->get<std::string>() : "";
}

std::string MetadataText(const json& object, const char* key) {
  const json* meta = Field(object, "metadata");
  return meta == nullptr ? "" : FieldText(*meta, key);
}

std::string AnnotationText(const json& object, const char* key) {
  const json* meta = Field(object, "metadata");
  const json* annotations = meta == nullptr ? nullptr : Field(*meta, "annotations");
  return annotations == nullptr ? "" : FieldText(*annotations, key);
}

bool JsonDepthAtMost(const nlohmann::json& root, int limit) {
  std::vector<std::pair<const nlohmann::json*, int>> stack = {{&root, 1}};
  while (!stack.empty()) {
    const auto [value, depth] = stack.back();
    stack.pop_back();
    if (depth > limit) return false;
    if (value->is_structured())
      for (const nlohmann::json& child : *value) stack.push_back({&child, depth + 1});
  }
  return true;
}

}  // namespace berth
