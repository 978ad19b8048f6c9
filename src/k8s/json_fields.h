// Fields of Kubernetes objects as they come over the wire, where any field may be missing, null
// or of another type: each accessor answers "absent" for all three, and never throws.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace berth {

// object[key] (exact key); null when object is not an object, or the field is absent or null.
const nlohmann::json* Field(const nlohmann::json& object, const char* key);
// object[key] when it is a string, else "".
std::string FieldText(const nlohmann::json& object, const char* key);
// object.metadata[key] and object.metadata.annotations[key] when strings, else "".
std::string MetadataText(const nlohmann::json& object, const char* key);
std::string AnnotationText(const nlohmann::json& object, const char* key);

// Deeper than any Kubernetes object. Reading and freeing JSON of any depth does not recurse, but
// writing a value out does: a request nested deeper is refused before anything writes it.
constexpr int kMaxKubeObjectDepth = 100;
// Whether `root` nests at most `limit` levels (a scalar is one); walks without recursing.
bool JsonDepthAtMost(const nlohmann::json& root, int limit);

}  // namespace berth
