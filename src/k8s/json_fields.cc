#include "k8s/json_fields.h"

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

}  // namespace berth
